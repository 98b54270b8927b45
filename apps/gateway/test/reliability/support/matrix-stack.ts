import type { ModelServerSpec } from '@triad/crd';
import type { SimEngineHandle } from '@triad/engine-sim';
import { counterTotal, deployTopology, type DeployedTopology, type MatrixStack, type TopologyName } from '@triad/testing/reliability';
import { startHarness, type Harness } from '../../support/harness';

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

/** What `useMatrixGateway` provides to the tests of its describe block (set before they run). */
export interface MatrixGateway {
  /** The in-process gateway harness. */
  readonly h: Harness;
  /** Unhandled rejections seen since the gateway started. */
  readonly rejections: readonly unknown[];
  topology(name: TopologyName): DeployedTopology;
}

/**
 * For a describe block: an in-process gateway (`beforeAll`) with each named topology deployed on its own loopback
 * subnet, `127.0.<firstSubnet + i>.*`, and unhandled rejections watched; all closed in `afterAll`.
 */
export function useMatrixGateway(names: readonly TopologyName[], firstSubnet: number): MatrixGateway {
  let h: Harness | undefined;
  let rejections: ReturnType<typeof watchUnhandledRejections> | undefined;
  const topologies = new Map<TopologyName, DeployedTopology>();
  beforeAll(async () => {
    rejections = watchUnhandledRejections();
    h = await startHarness({ config: { scheduling: 'in-process' } });
    let subnet = firstSubnet;
    for (const name of names) topologies.set(name, await deployTopology(matrixStack(h), name, `127.0.${subnet++}`));
  }, 60_000);
  afterAll(async () => {
    rejections?.stop();
    await h?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useMatrixGateway: the gateway has not started (use it inside a test)');
    return value;
  };
  return {
    get h() {
      return started(h);
    },
    get rejections() {
      return started(rejections).seen;
    },
    topology: (name) => started(topologies.get(name)),
  };
}
