import type { EndpointRef } from '@triad/bus';
import type { LegInfo, LegOutcome, StageObserver } from '@triad/connectors';
import { failedStageOf, type KvStrandedEvent, type ProxyRequest, type RequestHooks, type StageSpan } from '@triad/request';
import type { DispatchPublisher, LegLatency } from '../dispatch/dispatch-publisher';
import { recordEcHandoff } from '../observability/ec-handoff';
import type { GatewayMetrics } from '../observability/metrics';
import type { OutlierDetector } from '../outliers/outlier-detector';
import type { Logger } from '@triad/runtime';

/**
 * What this leg showed of its endpoint's latency: a prefill leg's duration is that pod's TTFT; a streamed answering
 * leg gives TTFT (leg start to the client's first byte) and TPOT. Buffered answers give nothing (their first byte
 * is their last), nor do encode legs.
 */
function legLatency(ctx: ProxyRequest, leg: LegInfo, final: boolean, tokens: number | undefined): LegLatency | undefined {
  const now = performance.now();
  if (leg.stage === 'prefill') return { ttftMs: now - leg.startedAt };
  const first = ctx.result.firstByteAt;
  if (!final || !ctx.stream || first < leg.startedAt) return undefined;
  const out: LegLatency = { ttftMs: first - leg.startedAt };
  if (tokens !== undefined && tokens > 1) out.tpotMs = (now - first) / (tokens - 1);
  return out;
}

/**
 * The stage loop's observer, one for the whole gateway: each leg becomes upstream gauges and, when a tracing hook
 * is installed, a stage span whose headers ride on the leg (the stage loop ends it); an engine leg also becomes
 * dispatch start/finish events (in-flight counts for the schedulers) and feeds outlier detection. A provider
 * leg does neither: no scheduler places requests on a provider.
 */
export class GatewayObserver implements StageObserver {
  readonly #dispatch: DispatchPublisher;
  readonly #metrics: GatewayMetrics;
  readonly #hooks: RequestHooks;
  readonly #logger: Logger | undefined;
  /** Outlier detection, once the outliers bucket is followed. */
  outliers: OutlierDetector | undefined = undefined;
  /** Prefill endpoints already logged for answering without `kv_transfer_params` (logged once each). */
  readonly #paramsMissingLogged = new Set<string>();

  constructor(dispatch: DispatchPublisher, metrics: GatewayMetrics, hooks: RequestHooks, logger?: Logger) {
    this.#dispatch = dispatch;
    this.#metrics = metrics;
    this.#hooks = hooks;
    this.#logger = logger;
  }

  legStart(ctx: ProxyRequest, leg: LegInfo): StageSpan | undefined {
    if (ctx.routing.server.kind === 'engine') {
      this.#dispatch.started(ctx.id, leg.endpoint.key, leg.stage, leg.stage === 'encode' ? undefined : ctx.inputTokens);
    }
    this.#metrics.upstream(ctx.routing.server.name, leg.stage, 1);
    return this.#hooks.onStageStart?.(ctx, leg.stage, leg.endpoint, leg.attempt);
  }

  legEnd(ctx: ProxyRequest, leg: LegInfo, outcome: LegOutcome): void {
    this.#metrics.upstream(ctx.routing.server.name, leg.stage, -1);
    this.#metrics.leg(ctx.routing.server.key, leg.stage, outcome.ok);
    if (ctx.routing.server.kind !== 'engine') return;
    const final = leg.stage === 'decode' || leg.stage === 'aggregated';
    const tokens = final ? ctx.result.usage?.completionTokens : undefined;
    this.#dispatch.finished(
      ctx.id,
      leg.endpoint.key,
      leg.stage,
      outcome.ok,
      tokens,
      outcome.ok ? legLatency(ctx, leg, final, tokens) : undefined,
    );
    this.outliers?.legEnded(ctx, leg, outcome);
  }

  legWaiting(ctx: ProxyRequest, leg: LegInfo, waiting: boolean): void {
    this.#metrics.upstreamWaiting(ctx.routing.server.name, leg.stage, waiting ? 1 : -1);
  }

  firstByte(ctx: ProxyRequest): void {
    if (ctx.stream) this.#metrics.streams(ctx.model, 1);
    this.#hooks.onFirstToken?.(ctx);
  }

  kvStranded(ctx: ProxyRequest, event: KvStrandedEvent): void {
    this.#metrics.kvStranded(event.engine, event.reason, event.action);
    this.#logger?.info({ requestId: ctx.id, model: ctx.model, ...event }, 'KV hand-off not taken by its decode');
  }

  streamResumed(ctx: ProxyRequest, outcome: 'resumed' | 'completed' | 'failed' | 'refused'): void {
    this.#metrics.streamResumed(ctx.model, outcome);
  }

  kvReleased(ctx: ProxyRequest, event: KvStrandedEvent, ok: boolean, error?: Error): void {
    this.#metrics.kvReleased(event.engine, ok);
    if (!ok) {
      this.#logger?.warn({ requestId: ctx.id, prefill: event.prefill, via: event.via, err: error?.message }, 'KV release leg failed');
    }
  }

  kvParamsMissing(ctx: ProxyRequest, prefill: EndpointRef): void {
    const server = ctx.routing.server;
    this.#metrics.kvParamsMissing(server.connector);
    if (this.#paramsMissingLogged.has(prefill.key)) return;
    if (this.#paramsMissingLogged.size >= 10_000) this.#paramsMissingLogged.clear(); // pods come and go
    this.#paramsMissingLogged.add(prefill.key);
    this.#logger?.warn(
      {
        requestId: ctx.id,
        modelServer: server.key,
        connector: server.connector,
        kvConnector: server.kind === 'engine' ? server.kv?.type : undefined,
        prefill: prefill.key,
        pod: prefill.pod,
        mooncakeFlow: prefill.mooncake?.flow,
      },
      'prefill answered without kv_transfer_params: its decode prefills the whole prompt again (does the pod run the KV ' +
        'connector its ModelServer names? upstream vLLM Mooncake needs the concurrent flow: see kvConnector.implementation)',
    );
  }

  retry(ctx: ProxyRequest, attempt: number, error: Error): void {
    this.#metrics.retry(ctx.model, failedStageOf(error) ?? 'unknown');
    recordEcHandoff(this.#metrics, this.#logger, ctx, error);
    this.#hooks.onRetry?.(ctx, attempt, error);
  }
}
