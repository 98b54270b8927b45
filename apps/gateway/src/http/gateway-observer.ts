import type { LegInfo, LegOutcome, ProxyCall, StageObserver } from '@triad/connectors';
import type { DispatchPublisher } from '../dispatch/dispatch-publisher';
import type { RequestHooks } from '../hooks';
import type { GatewayMetrics } from '../observability/metrics';
import type { InferenceRequest } from './inference-request';

/**
 * The stage loop's observer, one for the whole gateway: each leg becomes dispatch start/finish events (in-flight
 * counts for the schedulers), upstream gauges, access-log endpoints and, when a tracing hook is installed, a
 * stage span whose headers ride on the leg.
 */
export class GatewayObserver implements StageObserver {
  readonly #dispatch: DispatchPublisher;
  readonly #metrics: GatewayMetrics;
  readonly #hooks: RequestHooks;

  constructor(dispatch: DispatchPublisher, metrics: GatewayMetrics, hooks: RequestHooks) {
    this.#dispatch = dispatch;
    this.#metrics = metrics;
    this.#hooks = hooks;
  }

  legStart(call: ProxyCall, leg: LegInfo): Record<string, string> | undefined {
    const req = call as InferenceRequest;
    this.#dispatch.started(req.id, leg.endpoint.key, leg.stage, leg.stage === 'encode' ? undefined : req.inputTokens);
    this.#metrics.upstream(call.server.name, leg.stage, 1);
    const pods = req.endpoints[leg.stage];
    if (pods === undefined) req.endpoints[leg.stage] = [leg.endpoint.pod];
    else pods.push(leg.endpoint.pod);
    if (this.#hooks.onStageStart === undefined) return undefined;
    const span = this.#hooks.onStageStart(req, leg.stage, leg.endpoint, leg.attempt);
    if (span === undefined) return undefined;
    (req.spans ??= new Map()).set(leg, span);
    return span.headers;
  }

  legEnd(call: ProxyCall, leg: LegInfo, outcome: LegOutcome): void {
    const req = call as InferenceRequest;
    const final = leg.stage === 'decode' || leg.stage === 'aggregated';
    this.#dispatch.finished(req.id, leg.endpoint.key, leg.stage, outcome.ok, final ? req.result.usage?.completionTokens : undefined);
    this.#metrics.upstream(call.server.name, leg.stage, -1);
    this.#metrics.leg(req.modelServer ?? call.server.name, leg.stage, outcome.ok);
    if (req.spans !== undefined) {
      const span = req.spans.get(leg);
      if (span !== undefined) {
        req.spans.delete(leg);
        span.end(outcome.ok, outcome.status, outcome.error);
      }
    }
  }

  firstByte(call: ProxyCall): void {
    const req = call as InferenceRequest;
    if (req.stream) this.#metrics.streams(req.model, 1);
    this.#hooks.onFirstToken?.(req);
  }

  retry(call: ProxyCall, attempt: number, error: Error): void {
    const req = call as InferenceRequest;
    const stage = (error as { details?: { stage?: string } }).details?.stage ?? 'unknown';
    this.#metrics.retry(req.model, stage);
    this.#hooks.onRetry?.(req, attempt, error);
  }
}
