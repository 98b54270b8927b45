import type { ModelServerSpec } from '@triad/crd';
import type { SimEngineHandle } from '@triad/engine-sim';
import { counterTotal, type MatrixStack } from '@triad/testing/reliability';
import type { Harness } from '../../support/harness';

/** The reliability matrix's view of a gateway test harness (in-process gateway, sims in the test process). */
export function matrixStack(h: Harness): MatrixStack {
  return {
    gatewayUrl: h.gateway.url,
    metricsUrl: `http://127.0.0.1:${h.gateway.metricsPort}/metrics`,
    startSim: (o) => h.startSim(o),
    putServer: (name, spec) => h.putServer(name, spec as ModelServerSpec),
    putRoute: (name, spec) => h.putRoute(name, spec),
    putEndpoint: async (server, pod, role, sim, extra) => {
      await h.putEndpoint(server, pod, role, sim as SimEngineHandle, extra);
    },
    waitForModel: (model) => h.waitForModel(model),
  };
}

/** `triad_unexpected_errors_total` summed over its sources. */
export function unexpectedErrors(h: Harness): Promise<number> {
  return counterTotal(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`, 'triad_unexpected_errors_total');
}

/**
 * Collects the unhandled promise rejections of this process (where the gateway under test runs) until `stop()`:
 * in a service, `guardProcess` would count each in `triad_unexpected_errors_total`, which it does not install here.
 */
export function watchUnhandledRejections(): { readonly seen: unknown[]; stop(): void } {
  const seen: unknown[] = [];
  const onRejection = (reason: unknown) => seen.push(reason);
  process.on('unhandledRejection', onRejection);
  return { seen, stop: () => process.off('unhandledRejection', onRejection) };
}
