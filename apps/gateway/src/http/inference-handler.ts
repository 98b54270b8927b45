import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { clientAbortedError, runProxy, type ConnectorRegistry, type UpstreamPools } from '@triad/connectors';
import {
  RateLimitedError,
  RequestContext,
  asError,
  errorCodeOf,
  promptText,
  writeErrorResponse,
  type IncomingHeaders,
  type ProxyRequest,
  type RequestHooks,
  type RequestLimits,
  type RoutingPart,
} from '@triad/request';
import { countUnexpected, type Logger } from '@triad/runtime';
import type { ListenerRef } from '@triad/bus';
import { recordEcHandoff } from '../observability/ec-handoff';
import { writeAccessLog } from '../observability/access-log';
import type { GatewayMetrics } from '../observability/metrics';
import type { EnginePlanner } from '../planning/engine-planner';
import { prepareProviderRequest } from '../providers/provider-connector';
import { CHAT, COMPLETIONS, GENERATE } from '../routing/inference-paths';
import type { TargetLocator } from '../routing/target-locator';
import { estimateTokens } from '../scheduling/scheduling-request';
import type { KvView } from '../state/kv-view';
import type { GatewayObserver } from './gateway-observer';
import { parseInferenceBody } from './parse-body';

/** What the inference pipeline is built from. */
export interface InferenceDeps {
  readonly kv: KvView;
  /** Resolves a request to its target (routing/). */
  readonly locator: TargetLocator;
  /** Plans requests routed to engines: credentials, media, KV keys, scheduling (planning/). */
  readonly planner: EnginePlanner;
  readonly connectors: ConnectorRegistry;
  readonly pools: UpstreamPools;
  readonly metrics: GatewayMetrics;
  readonly hooks: RequestHooks;
  readonly observer: GatewayObserver;
  readonly logger: Logger;
  readonly accessLog: boolean;
  /** Release KV a vLLM prefill holds for a decode that did not take it (`TRIAD_KV_RELEASE`). */
  readonly kvRelease: boolean;
  /** Bounds every body is checked against before any work starts. */
  readonly limits: RequestLimits;
}

/** The response of an inference request, which knows its request once parsed (to abort it on disconnect). */
export interface InferenceResponse extends ServerResponse {
  triadRequest?: RequestContext;
  /** The trace id every answer of the request names (`x-triad-trace-id`), once the request span started. */
  triadTraceId?: string;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/**
 * Paths whose prompt is in `input` (and `instructions`) or Anthropic's `messages` + `system`: it counts for rate
 * limits and prefix hashing (all of it, as admission counts), as Kthena reads the Responses API and embeddings.
 */
const INPUT_PATHS: ReadonlySet<string> = new Set(['/v1/messages', '/v1/responses', '/v1/embeddings']);
const NO_BODY: Record<string, unknown> = {};
const ALL_INPUTS = { allInputs: true } as const;

function requestIdOf(headers: IncomingHeaders): string {
  const given = headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/**
 * Headers a client sends that every engine leg carries too: `traceparent`, `tracestate`, `baggage`. Not
 * `authorization`: the client's credential is the gateway's to check, and goes to the engines only when the
 * ModelServer asks for it (`engineAuth`).
 */
function forwardedHeaders(headers: IncomingHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  // One by one: a constant name is a named load, a name taken from a list a megamorphic keyed one.
  const traceparent = headers['traceparent'];
  if (typeof traceparent === 'string') out['traceparent'] = traceparent;
  const tracestate = headers['tracestate'];
  if (typeof tracestate === 'string') out['tracestate'] = tracestate;
  const baggage = headers['baggage'];
  if (typeof baggage === 'string') out['baggage'] = baggage;
  return out;
}

function onClientClose(this: InferenceResponse): void {
  const ctx = this.triadRequest;
  if (ctx !== undefined && !this.writableFinished) ctx.clientGone(clientAbortedError());
}

/**
 * The request pipeline for OpenAI inference calls, a director in the manner of Gateway API Inference Extension's
 * `requestcontrol`: parse, then admit (hooks) → resolve the target (routing/) → plan it (engine targets only:
 * planning/) → run it through the target's connector on the stage loop → metrics, access log, hooks. Other
 * `POST /v1/*` paths take the same way with the aggregated connector (one hop to the chosen endpoint).
 */
export class InferenceHandler {
  readonly #d: InferenceDeps;

  constructor(deps: InferenceDeps) {
    this.#d = deps;
  }

  /**
   * Handles one request to its end; never rejects. A failure that escaped the pipeline's own handling (a hook or
   * an observer that threw while finishing) is logged and counted, and the client still gets an answer.
   * `listener`: the Gateway listener the request arrived at (Gateway API mode), else undefined.
   */
  async handle(
    method: string,
    path: string,
    headers: IncomingHeaders,
    raw: Buffer | undefined,
    sink: InferenceResponse,
    listener?: ListenerRef,
  ): Promise<void> {
    try {
      await this.#handle(method, path, headers, raw, sink, listener);
    } catch (err) {
      countUnexpected('request_handler');
      this.#d.logger.error({ err, path }, 'request handler failed unexpectedly (a bug)');
      if (!sink.headersSent && !sink.destroyed) writeErrorResponse(sink, err, requestIdOf(headers), undefined, sink.triadTraceId);
      else if (!sink.writableEnded) sink.destroy();
    }
  }

  async #handle(
    method: string,
    path: string,
    headers: IncomingHeaders,
    raw: Buffer | undefined,
    sink: InferenceResponse,
    listener: ListenerRef | undefined,
  ): Promise<void> {
    const d = this.#d;
    const receivedAt = performance.now();
    const id = requestIdOf(headers);
    d.metrics.activeRequests.inc();
    let body: Record<string, unknown>;
    try {
      body = parseInferenceBody(raw, path, d.limits);
    } catch (err) {
      // Counted and logged like any request (model "unknown"), but hooks never saw it, so they are not told.
      const bad = new RequestContext(id, method, path, headers, NO_BODY, '', 0, receivedAt, sink, {});
      bad.result.error = asError(err);
      bad.result.status = writeErrorResponse(sink, err, id);
      this.#finish(bad, false);
      return;
    }
    const prompt =
      path === CHAT || path === COMPLETIONS
        ? promptText(body)
        : path === GENERATE
          ? generateText(body)
          : INPUT_PATHS.has(path)
            ? promptText(body, ALL_INPUTS)
            : '';
    const ctx = new RequestContext(
      id,
      method,
      path,
      headers,
      body,
      prompt,
      estimateTokens(prompt),
      receivedAt,
      sink,
      forwardedHeaders(headers),
    );
    sink.triadRequest = ctx;
    // `on`, not `once`: 'close' comes once per response, and `once` binds a wrapper per request.
    sink.on('close', onClientClose);
    try {
      d.hooks.onRequest?.(ctx);
      // Named in any answer written from here (success or error), so a user can look the request up in Jaeger: the
      // stage loop's head and the error answers put it first, as a header set now would be (not set now: a header set
      // before `writeHead` takes node's slower merging path).
      sink.triadTraceId = ctx.traceId;
      await this.#direct(ctx, listener);
    } catch (err) {
      ctx.result.error = asError(err);
      if (err instanceof RateLimitedError) {
        d.metrics.rateLimited(d.kv.routes.knows(ctx.model) ? ctx.model : 'unknown', err.limitType ?? 'tokens', path);
      }
      ctx.result.status = writeErrorResponse(sink, err, id, undefined, sink.triadTraceId);
    } finally {
      this.#finish(ctx, true);
    }
  }

  /**
   * admit → resolve → plan → run. Admission comes before resolution (the hooks' contract): a client without a
   * valid key learns nothing about which models exist. Failures before the answer started are thrown.
   */
  async #direct(ctx: RequestContext, listener: ListenerRef | undefined): Promise<void> {
    const d = this.#d;
    if (d.hooks.admit !== undefined) {
      const pending = d.hooks.admit(ctx);
      if (pending !== undefined) await pending;
    }
    const target = d.locator.locate(ctx, listener);
    const run: ProxyRequest =
      target.kind === 'engine'
        ? await d.planner.plan(this.#routed(ctx, target.routing), target)
        : prepareProviderRequest(this.#routed(ctx, target.routing), target.provider);
    if (run.sink.destroyed) throw clientAbortedError();
    await runProxy(run, d.connectors.get(run.proxy.connector), d.pools, d.observer, { kvRelease: d.kvRelease });
  }

  /** Records the target; counted per model only from here: client-chosen names that match nothing never become labels. */
  #routed<R extends RoutingPart>(ctx: RequestContext, routing: R): RequestContext & { readonly routing: R } {
    ctx.routed(routing);
    this.#d.metrics.downstream(ctx.model, 1);
    this.#d.hooks.onRouted?.(ctx);
    return ctx;
  }

  #finish(ctx: RequestContext, hooked: boolean): void {
    const d = this.#d;
    const end = performance.now();
    const r = ctx.result;
    const routing = ctx.routing;
    if (r.status === 0) r.status = ctx.sink.destroyed ? 499 : 500;
    d.metrics.activeRequests.dec();
    if (routing !== undefined) d.metrics.downstream(ctx.model, -1);
    const streamed = ctx.stream && r.firstByteAt > 0;
    if (streamed) d.metrics.streams(ctx.model, -1);
    const completion = r.usage?.completionTokens ?? 0;
    d.metrics.request({
      model: routing !== undefined ? ctx.model : 'unknown',
      path: ctx.path,
      route: routing?.route ?? '',
      server: routing?.server.key ?? '',
      upstreamModel: routing?.upstreamModel ?? '',
      mode: routing?.server.mode ?? '',
      status: r.status,
      errorType: r.error === undefined ? '' : (errorCodeOf(r.error) ?? 'INTERNAL'),
      durationS: (end - ctx.receivedAt) / 1000,
      encodeS: r.encodeMs / 1000,
      prefillS: r.prefillMs / 1000,
      decodeS: r.decodeMs / 1000,
      ttftS: streamed ? (r.firstByteAt - ctx.receivedAt) / 1000 : 0,
      tpotS: streamed && completion > 1 ? (end - r.firstByteAt) / 1000 / (completion - 1) : 0,
      promptTokens: r.usage?.promptTokens ?? 0,
      completionTokens: completion,
    });
    if (r.error !== undefined) recordEcHandoff(d.metrics, d.logger, ctx, r.error);
    for (const f of r.stageFallbacks) d.metrics.stageFallback(f.stage, f.reason);
    // The line is built only when the logger writes it (TRIAD_LOG_LEVEL=warn drops it after the work).
    if (d.accessLog && d.logger.isLevelEnabled('info')) writeAccessLog(d.logger, ctx, end);
    if (hooked) d.hooks.onEnd?.(ctx);
  }
}

/** The prompt of a `/generate` body for prefix hashing: its `text` when it is one string. */
function generateText(body: Record<string, unknown>): string {
  const text = body['text'];
  return typeof text === 'string' ? text : '';
}
