import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { clientAbortedError, clientWantsUsage, runProxy, type ConnectorRegistry, type UpstreamPools } from '@triad/connectors';
import {
  BadRequestError,
  NotFoundError,
  RateLimitedError,
  RequestContext,
  RequestError,
  asError,
  echo,
  errorCodeOf,
  extractMediaParts,
  isRouted,
  promptText,
  writeErrorResponse,
  type DpRankPicker,
  type IncomingHeaders,
  type MediaPart,
  type RequestHooks,
  type RequestLimits,
  type ResolvedRouting,
} from '@triad/request';
import { countUnexpected, type Logger } from '@triad/runtime';
import type { ListenerRef } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { recordEcHandoff } from '../observability/ec-handoff';
import type { KvKeyRequest } from '../scheduling/kv-block-hashes';
import type { PrefixHashOptions } from '@triad/scheduling';
import { writeAccessLog } from '../observability/access-log';
import type { GatewayMetrics } from '../observability/metrics';
import { schedulingError, type SchedulerClient } from '../scheduling/scheduler-client';
import { buildSchedulingRequest, estimateTokens } from '../scheduling/scheduling-request';
import type { KvView } from '../state/kv-view';
import type { GatewayObserver } from './gateway-observer';
import { parseInferenceBody } from './parse-body';
import type { EngineCredentials } from './engine-credentials';
import type { ProviderProxy } from '../providers/provider-proxy';
import type { GatewayApiView } from '../gateway-api/gateway-api-view';

/** What the inference pipeline is built from. */
export interface InferenceDeps {
  readonly kv: KvView;
  readonly scheduler: SchedulerClient;
  readonly connectors: ConnectorRegistry;
  readonly pools: UpstreamPools;
  readonly metrics: GatewayMetrics;
  readonly hooks: RequestHooks;
  readonly observer: GatewayObserver;
  readonly logger: Logger;
  readonly accessLog: boolean;
  /** Engine credentials ModelServers name (`engineAuth.credential`). */
  readonly engineCredentials: EngineCredentials;
  /** Release KV a vLLM prefill holds for a decode that did not take it (`TRIAD_KV_RELEASE`). */
  readonly kvRelease: boolean;
  /** Bounds every body is checked against before any work starts. */
  readonly limits: RequestLimits;
  /** Prompt hashing options matching the scheduler config. */
  readonly hashOptions: () => PrefixHashOptions;
  /** Gateway API records (listeners, HTTPRoutes), in Gateway API mode. */
  readonly gatewayApi?: GatewayApiView | undefined;
  /** Serves ModelRoute targets that name an ExternalModelProvider. */
  readonly providers: ProviderProxy;
  /** Engine block keys for precise-prefix-cache, when the scheduler config uses it. */
  readonly kvBlockKeys?: (request: KvKeyRequest) => Promise<string[] | undefined>;
  /** Chooses SGLang DP ranks for legs (engines reporting `dp_size` > 1). */
  readonly dpRank?: DpRankPicker;
}

/** The response of an inference request, which knows its request once parsed (to abort it on disconnect). */
export interface InferenceResponse extends ServerResponse {
  triadRequest?: RequestContext;
}

/**
 * Headers a client sends that every engine leg carries too. Not `authorization`: the client's credential is
 * the gateway's to check, and goes to the engines only when the ModelServer asks for it (`engineAuth`).
 */
const FORWARDED = ['traceparent', 'tracestate', 'baggage'] as const;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const CHAT = '/v1/chat/completions';
const COMPLETIONS = '/v1/completions';
/** SGLang's native generation API, routed like chat and completions (PD included). */
const GENERATE = '/generate';
/** Paths only providers serve as they are: their prompt counts for rate limits (all of it, as admission counts). */
const PROVIDER_PATHS: ReadonlySet<string> = new Set(['/v1/messages', '/v1/responses']);
const NO_MEDIA: readonly MediaPart[] = [];
const NO_BODY: Record<string, unknown> = {};
const ALL_INPUTS = { allInputs: true } as const;

function headerOf(headers: IncomingHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function requestIdOf(headers: IncomingHeaders): string {
  const given = headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

function forwardedHeaders(headers: IncomingHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FORWARDED) {
    const v = headers[name];
    if (typeof v === 'string') out[name] = v;
  }
  return out;
}

function onClientClose(this: InferenceResponse): void {
  const ctx = this.triadRequest;
  if (ctx !== undefined && !this.writableFinished) ctx.clientGone(clientAbortedError());
}

/**
 * The request pipeline for OpenAI inference calls: parse → hooks (admit) → ModelRoute → ModelServer → schedule
 * (NATS batch, or local fallback) → stage loop through the server's connector → metrics, access log, hooks.
 * Other `POST /v1/*` paths take the same way with the aggregated connector (one hop to the chosen endpoint).
 */
export class InferenceHandler {
  readonly #d: InferenceDeps;

  constructor(deps: InferenceDeps) {
    this.#d = deps;
  }

  /**
   * Handles one request to its end; never rejects. A failure that escaped the pipeline's own handling (a hook or
   * an observer that threw while finishing) is logged and counted, and the client still gets an answer.
   */
  /** `listener`: the Gateway listener the request arrived at (Gateway API mode), else undefined. */
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
      if (!sink.headersSent && !sink.destroyed) writeErrorResponse(sink, err, requestIdOf(headers));
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
          : PROVIDER_PATHS.has(path)
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
    sink.once('close', onClientClose);
    try {
      d.hooks.onRequest?.(ctx);
      // Set before any answer (success or error) is written, so a user can look the request up in Jaeger.
      if (ctx.traceId !== undefined) sink.setHeader('x-triad-trace-id', ctx.traceId);
      if (d.hooks.admit !== undefined) {
        const pending = d.hooks.admit(ctx);
        if (pending !== undefined) await pending;
      }
      await this.#routeAndProxy(ctx, listener);
    } catch (err) {
      ctx.result.error = asError(err);
      if (err instanceof RateLimitedError) {
        d.metrics.rateLimited(d.kv.routes.knows(ctx.model) ? ctx.model : 'unknown', err.limitType ?? 'tokens', path);
      }
      ctx.result.status = writeErrorResponse(sink, err, id);
    } finally {
      this.#finish(ctx, true);
    }
  }

  async #routeAndProxy(ctx: RequestContext, listener: ListenerRef | undefined): Promise<void> {
    const d = this.#d;
    const inference = ctx.path === CHAT || ctx.path === COMPLETIONS || ctx.path === GENERATE;
    // On a Gateway listener ModelRoutes serve `/v1/` paths; anything they leave goes to HTTPRoutes (Kthena's order).
    let match = listener === undefined || ctx.path.startsWith('/v1/') ? d.kv.routes.resolve(ctx, undefined, listener) : undefined;
    let upstreamPath: string | undefined;
    if (match === undefined && listener !== undefined && d.gatewayApi !== undefined) {
      const http = d.gatewayApi.match(listener, headerOf(ctx.headers, 'host'), ctx.path);
      if (http !== undefined) {
        if (http.backend === undefined) {
          throw new RequestError(
            ErrorCode.Internal,
            `HTTPRoute ${http.route} matched but its rule has no InferencePool backend to send to`,
          );
        }
        match = {
          route: http.route,
          namespace: http.backend.namespace,
          modelServer: http.backend.modelServer,
          provider: undefined,
          lora: false,
          rule: String(http.rule),
        };
        upstreamPath = http.path;
        if (http.hostname !== undefined) ctx.upstreamHeaders['host'] = http.hostname;
      }
    }
    if (match === undefined) {
      const what = listener ? 'ModelRoute or HTTPRoute' : 'ModelRoute';
      throw new NotFoundError(`The model '${echo(ctx.model)}' does not exist (no ${what} matches it)`, 'model');
    }
    if (
      upstreamPath === undefined &&
      !inference &&
      match.provider === undefined &&
      this.#disaggregated(match.namespace, match.modelServer)
    ) {
      // Other `/v1/*` calls carry no bootstrap room, so a PD server would refuse them (400): an aggregated target
      // (or a provider) of the same rule serves them, else the gateway says why.
      const servesAsIs = (ns: string, name: string | undefined, provider: string | undefined) =>
        provider !== undefined || (name !== undefined && d.kv.server(ns, name) !== undefined && !this.#disaggregated(ns, name));
      match = d.kv.routes.resolve(ctx, servesAsIs, listener);
      if (match === undefined) {
        throw new BadRequestError(
          `${echo(ctx.path)} is not served for model '${echo(ctx.model)}': its ModelServers run disaggregated (prefill/decode), ` +
            'where only /v1/chat/completions, /v1/completions and /generate are routed, and no aggregated ModelServer serves it',
          null,
        );
      }
    }
    if (match.provider !== undefined) {
      await d.providers.serve(ctx, { ...match, provider: match.provider });
      return;
    }
    const entry = d.kv.server(match.namespace, match.modelServer);
    // Kthena: rewrite `model` to ModelServer.spec.model unless the request named a LoRA adapter.
    const upstreamModel = entry === undefined ? '' : !match.lora && entry.record.spec.model ? entry.record.spec.model : ctx.model;
    ctx.routed({
      route: match.route,
      namespace: match.namespace,
      serverName: match.modelServer,
      lora: match.lora,
      server: entry?.profile,
      upstreamModel,
      upstreamPath,
    });
    // Counted per model only once routed: client-chosen names that match nothing must not become label values.
    d.metrics.downstream(ctx.model, 1);
    if (!isRouted(ctx)) throw new NotFoundError(`can't find model server: ${match.namespace}/${match.modelServer}`, 'model');
    if (upstreamModel !== ctx.model) ctx.body['model'] = upstreamModel;
    // The engines get the ModelServer's own credential, or the client's only when the server asks for pass-through.
    const server = ctx.routing.server;
    const authorization = ctx.headers['authorization'];
    if (server.engineCredential !== undefined) {
      ctx.upstreamHeaders['authorization'] = d.engineCredentials.authorization(server.namespace, server.engineCredential);
    } else if (server.authPassThrough === true && typeof authorization === 'string') {
      ctx.upstreamHeaders['authorization'] = authorization;
    }
    d.hooks.onRouted?.(ctx);

    const profile = ctx.routing.server;
    const enginePath = upstreamPath ?? ctx.path;
    if (inference && profile.engine === 'SGLang' && profile.mode !== 'aggregated') {
      refuseParallelSampling(ctx.body, ctx.model, ctx.routing);
    }
    const openAi = enginePath === CHAT || enginePath === COMPLETIONS;
    const injectUsage = openAi && ctx.stream;
    // SGLang EPD's language-only prefill calls its encoders itself: no media items to plan.
    const media = enginePath === CHAT && profile.mode === 'epd' && profile.engine !== 'SGLang' ? extractMediaParts(ctx.body) : NO_MEDIA;
    // The engines' own block keys for precise-prefix-cache (local tokenizer or the engine's tokenize endpoint).
    const kvKeys = openAi
      ? await d.kvBlockKeys?.({
          engine: profile.engine,
          server: profile.key,
          model: upstreamModel,
          body: ctx.body,
          lora: ctx.routing.lora ? upstreamModel : undefined,
          authorization: ctx.upstreamHeaders['authorization'],
        })
      : undefined;
    const started = performance.now();
    const { decision, local } = await d.scheduler.schedule(buildSchedulingRequest(ctx, media, d.hashOptions(), kvKeys), ctx);
    const durationMs = performance.now() - started;
    ctx.scheduled({ decision, local, durationMs });
    d.metrics.scheduled(local ? 'local' : 'scheduler', durationMs / 1000);
    if (!decision.ok) throw schedulingError(decision.code, decision.message);
    ctx.prepared({
      decision,
      connector: inference ? profile.connector : 'aggregated',
      injectUsage,
      clientWantsUsage: injectUsage && clientWantsUsage(ctx.body, profile.engine),
      media,
      dpRank: inference && profile.engine === 'SGLang' ? d.dpRank : undefined,
    });
    d.hooks.onScheduled?.(ctx);
    if (ctx.sink.destroyed) throw clientAbortedError();
    await runProxy(ctx, d.connectors.get(ctx.proxy.connector), d.pools, d.observer, { kvRelease: d.kvRelease });
  }

  #disaggregated(namespace: string, server: string): boolean {
    const mode = this.#d.kv.server(namespace, server)?.profile.mode;
    return mode !== undefined && mode !== 'aggregated';
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
      server: routing?.server?.key ?? '',
      upstreamModel: routing?.upstreamModel ?? '',
      mode: routing?.server?.mode ?? '',
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
    if (d.accessLog) writeAccessLog(d.logger, ctx, end);
    if (hooked) d.hooks.onEnd?.(ctx);
  }
}

/** The prompt of a `/generate` body for prefix hashing: its `text` when it is one string. */
function generateText(body: Record<string, unknown>): string {
  const text = body['text'];
  return typeof text === 'string' ? text : '';
}

/**
 * SGLang PD and EPD cannot sample in parallel: SGLang sends every sample of a prompt on one bootstrap room, so the
 * request would hang until the engines' 300 s timeout and fail with 500 (docs/protocols/sglang.md). The gateway
 * refuses `n > 1` (`sampling_params.n` on `/generate`) with a 400 that says so, before anything is scheduled.
 */
function refuseParallelSampling(body: Record<string, unknown>, model: string, routing: ResolvedRouting): void {
  const sp = body['sampling_params'];
  const fromParams = sp !== null && typeof sp === 'object' && !Array.isArray(sp) ? (sp as Record<string, unknown>)['n'] : undefined;
  const n = typeof body['n'] === 'number' ? body['n'] : typeof fromParams === 'number' ? fromParams : 1;
  if (n <= 1) return;
  throw new BadRequestError(
    `n=${n} is not supported for model '${echo(model)}': its ModelServer ${routing.namespace}/${routing.serverName} runs ` +
      'SGLang prefill/decode disaggregation, which cannot sample in parallel (all samples would share one KV-transfer room and ' +
      'hang); send n separate requests instead',
    typeof body['n'] === 'number' ? 'n' : 'sampling_params.n',
  );
}
