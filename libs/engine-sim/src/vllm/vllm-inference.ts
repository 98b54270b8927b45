import { planFrom } from '../engine/continuation';
import type { GenerationSpec } from '../engine/generation';
import type { PrefillWork } from '../engine/latency';
import type { Rank } from '../engine/rank';
import { EngineHttpError } from '../http/engine-error';
import type { Exchange, RouteHandler } from '../http/router';
import { checkContextLength, requestIdOf, responseHeaders, traceHeaders } from '../openai/common';
import type { ResponseFormat, ResponseView } from '../openai/format';
import { parseInferenceRequest, type InferenceRequest } from '../openai/inference-request';
import { serveGeneration } from '../openai/serve-generation';
import { vllmChatFormat, vllmCompletionFormat } from '../openai/vllm-format';
import type { BootstrapServer } from '../bootstrap/bootstrap-server';
import type { SimContext } from '../sim-context';
import { EcUnavailableError, GENERATION_ERROR, type EcConnector } from './ec-connector';
import { failUnavailable, itemsToEncode } from './ec-consume';
import type { CoreWork } from '../engine/core/core-generation';
import { promptLayout } from '../engine/core/prompt-layout';
import { startEventStream } from '../http/respond';
import { keepStreamAlive } from '../http/sse-keep-alive';
import { streamErrorEvents } from '../http/engine-error';
import type { KvBlockStore } from './kv-block-store';
import { KvLoadFailedError, kvParamsOf, type KvRequest, type KvSim } from './kv/kv-sim';
import { checkEmbedsAllowed, mmFeatures, type MmFeature } from './mm-features';
import { serveVllmEncode } from './vllm-encode';

export interface VllmDeps {
  readonly ctx: SimContext;
  /** Mooncake bootstrap server (prefill started with a bootstrap port). */
  readonly bootstrap: BootstrapServer | undefined;
  /** The EC connector (`ecConnector` option) of an encoder or EC consumer. */
  readonly ec: EcConnector;
  readonly kv: KvBlockStore;
  /** The KV connector (`kvConnector`) of a prefill or decode. */
  readonly kvSim: KvSim;
}

/** What a prefill/decode request costs before its first token, after cache lookups and KV pulls. */
interface Preparation {
  readonly cachedTokens: number;
  readonly work: PrefillWork;
  /** With an engine core: what it schedules (its prefix and encoder caches are consulted when it schedules). */
  readonly core?: CoreWork;
}

/** `POST /v1/chat/completions` and `/v1/completions` of a vLLM instance in any role. */
export function vllmInferenceHandler(deps: VllmDeps, kind: 'chat' | 'completion'): RouteHandler {
  const format: ResponseFormat = kind === 'chat' ? vllmChatFormat : vllmCompletionFormat;
  return async (ex: Exchange) => {
    const { ctx } = deps;
    const request = parseInferenceRequest(kind, ex.body, 'vllm');
    const model = request.model ?? ctx.model;
    if (!ctx.servesModel(model)) throw new EngineHttpError(404, `The model \`${model}\` does not exist.`, 'NotFoundError', 'model');
    ctx.counters.inc('requests');
    const requestId = requestIdOf(ex.req.headers);
    const features = mmFeatures(request, ctx.model);
    ctx.counters.inc('embedsParts', checkEmbedsAllowed(features, ctx.options.enableMmEmbeds ?? false));
    const pinned = requestedRank(ex.req.headers['x-data-parallel-rank'], ctx.ranks.length);
    if (ctx.role !== 'encode') checkContextLength(ctx, request);
    if (pinned !== undefined) ctx.counters.inc('dpRankPinned');
    const rank = ctx.pickRank(pinned);
    if (ctx.role === 'encode') {
      await serveVllmEncode(deps, ex, request, features, rank, requestId, model);
      return;
    }
    if (request.stream) keepStreamAlive(ex.res, ctx.options.sseKeepAliveIntervalMs);
    const fault = ex.fault;
    if (fault?.mode === 'error-in-stream') {
      // The engine fails the request after its server took it (vLLM's GenerationError), `delayMs` after the stream opened.
      if (request.stream) {
        startEventStream(ex.res, responseHeaders(requestId));
        ex.res.flushHeaders();
      }
      if (fault.delayMs > 0) await ctx.clock.sleep(fault.delayMs);
      if (!ex.res.destroyed) finishWithError(ex, request, requestId);
      return;
    }
    const kvReq = kvRequestOf(ex, request, rank, requestId);
    let prep: Preparation;
    try {
      prep = await prepare(deps, ex, request, features, rank, requestId, kvReq);
    } catch (err) {
      if (err instanceof KvLoadFailedError) {
        failKvLoad(ctx, ex, request, requestId);
        return;
      }
      if (!(err instanceof EcUnavailableError)) throw err;
      failUnavailable(ctx, ex, err, request, requestId);
      return;
    }
    const plan = planFrom({ key: request.outputKey, offset: request.outputOffset }, request);
    const spec: GenerationSpec = {
      rank,
      arrivedAt: ex.arrivedAt,
      promptTokens: request.promptTokens,
      cachedTokens: prep.cachedTokens,
      work: prep.work,
      plan,
      ...(prep.core ? { core: prep.core } : {}),
    };
    const view: ResponseView = {
      id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${requestId}`,
      created: Math.floor(Date.now() / 1000),
      model,
      promptTokens: request.promptTokens,
      cachedTokens: prep.cachedTokens,
      outputKey: request.outputKey,
      outputOffset: request.outputOffset,
      plan,
      includeUsage: request.includeUsage,
      continuousUsage: request.continuousUsage,
    };
    const remoteDecode = kvReq.params?.['do_remote_decode'] === true;
    const producer = ctx.role === 'prefill' || ctx.role === 'both';
    await serveGeneration({
      ex,
      env: ctx.env,
      spec,
      view,
      format,
      stream: request.stream,
      headers: responseHeaders(requestId),
      finish: () => {
        if (producer) deps.kvSim.stored?.(kvReq);
        if (!remoteDecode) return {};
        const kvTransferParams = deps.kvSim.produce(kvReq, request.stream);
        return kvTransferParams === undefined ? {} : { kvTransferParams };
      },
    });
  };
}

/** The KV connector's view of the request: its params, ids, rank and a signal that fires when the client leaves. */
function kvRequestOf(ex: Exchange, request: InferenceRequest, rank: Rank, requestId: string): KvRequest {
  const abort = new AbortController();
  ex.res.once('close', () => abort.abort());
  return {
    request,
    params: kvParamsOf(request.body),
    requestId,
    rank,
    headers: traceHeaders(ex.req.headers),
    signal: abort.signal,
    onWait: () => {
      // vLLM's server has answered 200 and opened the stream (headers sent) before the engine waits for anything.
      if (request.stream && !ex.res.headersSent && !ex.res.destroyed) {
        startEventStream(ex.res, responseHeaders(requestId));
        ex.res.flushHeaders();
      }
    },
  };
}

/**
 * A decode whose remote KV load failed under `kv_load_failure_policy: fail`: vLLM finishes the request with an
 * error, answered as a 500 before any byte, or as an error event and `[DONE]` once the stream is open.
 */
function failKvLoad(ctx: SimContext, ex: Exchange, request: InferenceRequest, requestId: string): void {
  if (ex.res.destroyed) {
    ctx.counters.inc('aborted');
    return;
  }
  ctx.counters.inc('kvLoadFailedRequests');
  finishWithError(ex, request, requestId);
}

/**
 * A request the engine finished with an error (vLLM's `GenerationError`): a 500 before any byte when not streamed;
 * streamed, vLLM's server has answered 200 and opened the stream already, so the error is its first event.
 */
function finishWithError(ex: Exchange, request: InferenceRequest, requestId: string): void {
  if (!request.stream) throw GENERATION_ERROR;
  if (!ex.res.headersSent) startEventStream(ex.res, responseHeaders(requestId));
  ex.res.end(streamErrorEvents('vllm', GENERATION_ERROR));
}

/** vLLM's `X-data-parallel-rank`: an integer below the DP size, else the engine's 400. */
function requestedRank(header: string | string[] | undefined, ranks: number): number | undefined {
  if (header === undefined) return undefined;
  const text = (Array.isArray(header) ? header[0] : header)?.trim() ?? '';
  if (!/^-?\d+$/.test(text)) {
    throw new EngineHttpError(400, `Invalid X-data-parallel-rank header: ${JSON.stringify(text)} is not an integer.`);
  }
  const rank = Number(text);
  if (rank < 0 || rank >= ranks) throw new EngineHttpError(400, `data_parallel_rank ${rank} is out of range [0, ${ranks}).`);
  return rank;
}

/** Prefix-cache lookup, remote KV (decode) and EC lookups (EC consumer), in the order vLLM does them. */
async function prepare(
  deps: VllmDeps,
  ex: Exchange,
  request: InferenceRequest,
  features: readonly MmFeature[],
  rank: Rank,
  requestId: string,
  kvReq: KvRequest,
): Promise<Preparation> {
  const { ctx } = deps;
  const core = rank.core;
  // An engine core looks the prefix up when it schedules the request, not on arrival.
  const prefixHit = core ? 0 : rank.prefixCache.lookup(request);
  if (!core) ctx.metrics.prefixCache(rank, request.promptTokens, prefixHit);
  let transferTokens = 0;
  let kvArrived = false;
  // Only an instance that consumes KV looks for it (a prefill's params ask it to produce).
  const received = ctx.role === 'decode' || ctx.role === 'both' ? await deps.kvSim.receive(kvReq) : undefined;
  if (received !== undefined) {
    kvArrived = true;
    ctx.counters.inc('kvPullsReceived');
    transferTokens = Math.max(0, Math.min(received, request.promptTokens - 1) - prefixHit);
    ctx.metrics.externalCache(rank, request.promptTokens - prefixHit, transferTokens);
  } else if (ctx.role === 'decode') {
    // A decode without a usable remote prefill computes the prompt itself.
    ctx.counters.inc('localPrefillFallbacks');
  }
  // With the prompt's KV pulled from a prefill, nothing of it is computed here, so nothing needs encoding. Otherwise
  // every item is acquired or encoded, also when the prefix cache holds the prompt: a sim's prefix cache also learns
  // from requests that failed, and a retry must not pass for a success because of it.
  // vLLM asks its encoder cache before the EC connector: items cached in the engine are not fetched.
  const ecFeatures = core ? features.filter((f) => !core.encoderCache.has(f.identifier)) : features;
  const toEncode = kvArrived ? new Set<string>() : await itemsToEncode(ctx, deps.ec, ex, request, ecFeatures, rank, requestId);
  const cachedTokens = prefixHit + transferTokens;
  const work = { computeTokens: Math.max(0, request.promptTokens - cachedTokens), encodeItems: toEncode.size, transferTokens };
  if (!core) return { cachedTokens, work };
  const layout = promptLayout(request.pieces, core.config.blockSize);
  // Loaded through the connector: asked for and acquired (or the prompt's KV arrived whole).
  const asked = new Set(ecFeatures.map((f) => f.identifier));
  const items = features.map((f) => ({
    id: f.identifier,
    embeds: f.tokens,
    start: layout.mediaStarts[f.index] ?? 0,
    external: kvArrived || (asked.has(f.identifier) && !toEncode.has(f.identifier)),
  }));
  if (!core.fits(request.promptTokens, request.maxTokens ?? 0)) {
    throw new EngineHttpError(400, `The prompt (${request.promptTokens} tokens) does not fit in the engine's KV cache.`);
  }
  // Publishing KV events: the blocks carry the engine's keys (from the prompt's token ids), as a router computes them.
  const keys = ctx.coreBlockKeys?.(request, layout.blockHashes);
  const blocks = keys ? { blockHashes: keys.blockHashes, published: keys.published } : { blockHashes: layout.blockHashes };
  return { cachedTokens, work, core: { ...blocks, items, externalTokens: transferTokens } };
}
