import type { GenerationSpec } from '../engine/generation';
import type { PrefillWork } from '../engine/latency';
import type { Rank } from '../engine/rank';
import { planOutput } from '../engine/tokens';
import { EngineHttpError } from '../http/engine-error';
import type { Exchange, RouteHandler } from '../http/router';
import { checkContextLength, requestIdOf, responseHeaders, traceHeaders } from '../openai/common';
import type { BodyExtras, ResponseFormat, ResponseView } from '../openai/format';
import { parseInferenceRequest, type InferenceRequest } from '../openai/inference-request';
import { serveGeneration } from '../openai/serve-generation';
import { vllmChatFormat, vllmCompletionFormat } from '../openai/vllm-format';
import type { BootstrapServer } from '../bootstrap/bootstrap-server';
import type { SimContext } from '../sim-context';
import { EcUnavailableError, type EcConnector } from './ec-connector';
import { failUnavailable, localEncodesNeeded } from './ec-consume';
import type { KvBlockStore } from './kv-block-store';
import { pullKv, remotePrefillOf } from './kv-side-channel';
import { checkEmbedsAllowed, mmFeatures, type MmFeature } from './mm-features';
import { awaitMooncakeTransfer, mooncakeRemoteOf, mooncakeTransferIdOf } from './mooncake';
import { serveVllmEncode } from './vllm-encode';

export interface VllmDeps {
  readonly ctx: SimContext;
  /** Mooncake bootstrap server (prefill started with a bootstrap port). */
  readonly bootstrap: BootstrapServer | undefined;
  /** The EC connector (`ecConnector` option) of an encoder or EC consumer. */
  readonly ec: EcConnector;
  readonly kv: KvBlockStore;
}

/** What a prefill/decode request costs before its first token, after cache lookups and KV pulls. */
interface Preparation {
  readonly cachedTokens: number;
  readonly work: PrefillWork;
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
    let prep: Preparation;
    try {
      prep = await prepare(deps, ex, request, features, rank, requestId);
    } catch (err) {
      if (!(err instanceof EcUnavailableError)) throw err;
      failUnavailable(ctx, ex, err, request, requestId);
      return;
    }
    const plan = planOutput(request.outputKey, request);
    const spec: GenerationSpec = {
      rank,
      arrivedAt: ex.arrivedAt,
      promptTokens: request.promptTokens,
      cachedTokens: prep.cachedTokens,
      work: prep.work,
      plan,
    };
    const view: ResponseView = {
      id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${requestId}`,
      created: Math.floor(Date.now() / 1000),
      model,
      promptTokens: request.promptTokens,
      cachedTokens: prep.cachedTokens,
      outputKey: request.outputKey,
      plan,
      includeUsage: request.includeUsage,
      continuousUsage: request.continuousUsage,
    };
    const remoteDecode = isRemoteDecodeRequest(request.body['kv_transfer_params']);
    await serveGeneration({
      ex,
      env: ctx.env,
      spec,
      view,
      format,
      stream: request.stream,
      headers: responseHeaders(requestId),
      finish: remoteDecode ? () => holdForRemoteDecode(deps, requestId, request, request.stream) : undefined,
    });
  };
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

function isRemoteDecodeRequest(params: unknown): boolean {
  return !!params && typeof params === 'object' && (params as Record<string, unknown>)['do_remote_decode'] === true;
}

/** Prefix-cache lookup, NIXL pull (decode) and EC lookups (EC consumer), in the order vLLM does them. */
async function prepare(
  deps: VllmDeps,
  ex: Exchange,
  request: InferenceRequest,
  features: readonly MmFeature[],
  rank: Rank,
  requestId: string,
): Promise<Preparation> {
  const { ctx } = deps;
  const prefixHit = rank.prefixCache.lookup(request);
  ctx.metrics.prefixCache(rank, request.promptTokens, prefixHit);
  let transferTokens = 0;
  let kvArrived = false;
  const params = request.body['kv_transfer_params'];
  const mooncake = mooncakeRemoteOf(params);
  const nixl = mooncake ? undefined : remotePrefillOf(params, requestId);
  if (mooncake || nixl) {
    const headers = traceHeaders(ex.req.headers);
    const pulled = mooncake ? await awaitMooncakeTransfer(ctx, mooncake, headers, ex.res) : await pullKv(ctx, nixl!, headers);
    if (pulled !== undefined) {
      kvArrived = true;
      ctx.counters.inc('kvPullsReceived');
      transferTokens = Math.max(0, Math.min(pulled, request.promptTokens - 1) - prefixHit);
      ctx.metrics.externalCache(rank, request.promptTokens - prefixHit, transferTokens);
    } else {
      ctx.counters.inc('localPrefillFallbacks');
    }
  } else if (ctx.role === 'decode') {
    // A decode asked to decode without a usable remote prefill recomputes the prompt itself.
    ctx.counters.inc('localPrefillFallbacks');
  }
  // With the prompt's KV pulled from a prefill, nothing of it is computed here, so nothing needs encoding. Otherwise
  // every item is acquired or encoded, also when the prefix cache holds the prompt: a sim's prefix cache also learns
  // from requests that failed, and a retry must not pass for a success because of it.
  const encodeItems = kvArrived ? 0 : await localEncodesNeeded(ctx, deps.ec, ex, request, features, rank, requestId);
  const cachedTokens = prefixHit + transferTokens;
  return { cachedTokens, work: { computeTokens: Math.max(0, request.promptTokens - cachedTokens), encodeItems, transferTokens } };
}

/**
 * KV producer: a Mooncake transfer is announced on the bootstrap server; NIXL blocks are kept and the answer tells
 * the decode where to read them (`request_finished` params, non-streamed answers only, as in vLLM).
 */
function holdForRemoteDecode(deps: VllmDeps, requestId: string, request: InferenceRequest, stream: boolean): BodyExtras {
  const { ctx } = deps;
  const promptTokens = request.promptTokens;
  ctx.counters.inc('kvHandoffsPrepared');
  const transferId = mooncakeTransferIdOf(request.body['kv_transfer_params']);
  if (transferId !== undefined) deps.bootstrap?.registerTransfer(transferId, promptTokens);
  if (stream) return {};
  const blockIds = deps.kv.hold(requestId, promptTokens);
  const params = {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_block_ids: blockIds,
    remote_engine_id: ctx.engineId,
    remote_request_id: requestId,
    remote_host: ctx.advertiseHost,
    remote_port: ctx.port,
    tp_size: 1,
  };
  return { kvTransferParams: JSON.stringify(params) };
}
