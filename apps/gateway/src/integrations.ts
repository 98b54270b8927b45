import type { Bus } from '@triad/bus/client';
import type { RequestContext, RequestHooks } from '@triad/request';
import type { Logger } from '@triad/runtime';
import type { Registry } from 'prom-client';
import type { GatewayConfig } from './config';
import type { KvView } from './state/kv-view';

/** What the optional integrations need from the gateway. */
export interface IntegrationDeps {
  readonly config: GatewayConfig;
  readonly kv: KvView;
  readonly bus: Bus;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly replicaId: string;
  /** Telemetry was set up and exports spans. */
  readonly tracing: boolean;
}

/** The lifecycle hooks of the configured integrations, in call order, and how to stop them. */
export interface Integrations {
  readonly hooks: RequestHooks[];
  /** NATS headers for a scheduling batch (trace context), when tracing is on. */
  readonly batchHeaders: ((requests: readonly (RequestContext | undefined)[]) => Record<string, string> | undefined) | undefined;
  close(): Promise<void>;
}

/**
 * Admission hooks that only act on requests whose model has a `ModelRoute.spec.rateLimit` (the default when the
 * gateway has no admission config: no keys, no tiers, no fair queue, so nothing else could refuse a request).
 */
function routeLimitsOnly(inner: RequestHooks, rateLimitFor: (model: string) => unknown): RequestHooks {
  return {
    ...inner,
    admit: (ctx) => (rateLimitFor(ctx.model) === undefined ? undefined : inner.admit?.(ctx)),
  };
}

/**
 * Plugs tracing (libs/telemetry) and admission control (libs/admission) into the request lifecycle through the
 * hook interface only. Tracing is loaded on demand (only with `OTEL_*` tracing config); admission always runs
 * for routes with a rateLimit, and for everything else only with an admission config file.
 */
export async function createIntegrations(deps: IntegrationDeps): Promise<Integrations> {
  const hooks: RequestHooks[] = [];
  let batchHeaders: Integrations['batchHeaders'];
  const closers: (() => Promise<void>)[] = [];
  // The request span for admission's events, when tracing is on.
  let spanOf: import('@triad/admission').AdmissionHookOptions['spanOf'];
  if (deps.tracing) {
    const telemetry = require('@triad/telemetry') as typeof import('@triad/telemetry');
    // Tracing first: its request span is open before admission runs and closes after admission released.
    const tracingHooks = telemetry.createGatewayTracingHooks();
    hooks.push({
      ...tracingHooks,
      // The request's trace id, for the `x-triad-trace-id` answer header and the access log.
      onRequest: (ctx) => {
        tracingHooks.onRequest(ctx);
        ctx.traceId = telemetry.requestTraceId(ctx);
      },
    });
    spanOf = telemetry.requestSpanOf;
    batchHeaders = (requests) =>
      telemetry.injectBatchTraceHeaders(requests.map((ctx) => (ctx === undefined ? undefined : telemetry.scheduleSpanOf(ctx))));
  }
  // Admission always runs: a `ModelRoute.spec.rateLimit` holds with no other setting, as in Kthena. Without an
  // admission config nobody authenticates (everyone is anonymous), budgets are shared in NATS KV (`auto` store),
  // and requests for models whose route has no rateLimit skip admission altogether.
  const { createAdmission, createAdmissionHooks } = require('@triad/admission') as typeof import('@triad/admission');
  const admission = await createAdmission(deps.config.admissionConfig ?? {}, {
    registry: deps.registry,
    logger: deps.logger,
    bus: deps.bus,
    env: process.env,
    replicaId: deps.replicaId,
    // The gateway counts rate-limit refusals itself (kthena_router_rate_limit_exceeded_total).
    countRateLimitExceeded: false,
  });
  // Kthena's ENABLE_FAIRNESS_SCHEDULING turns the fair queue on without a config file: then every request queues.
  const configured = deps.config.admissionConfig !== undefined || admission.config.fairness.enabled;
  const rateLimitFor = (model: string) => deps.kv.routes.rateLimitFor(model);
  const admissionHooks = createAdmissionHooks(admission, {
    rateLimitFor,
    // The `triad.admission.*` events (queued, dequeued, admitted, rejected) land on the request span.
    ...(spanOf !== undefined ? { spanOf } : {}),
  });
  hooks.push(configured ? admissionHooks : routeLimitsOnly(admissionHooks, rateLimitFor));
  closers.push(() => admission.close());
  return {
    hooks,
    batchHeaders,
    close: async () => {
      for (const c of closers) await c();
    },
  };
}
