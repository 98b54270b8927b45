import type { GenerationSpec } from '../engine/generation';
import type { PrefillWork } from '../engine/latency';
import type { Rank } from '../engine/rank';
import { planOutput } from '../engine/tokens';
import { EngineHttpError } from '../http/engine-error';
import type { Exchange, RouteHandler } from '../http/router';
import { checkContextLength, requestIdOf, responseHeaders, traceHeaders } from '../openai/common';
import type { BodyExtras, ResponseFormat, ResponseView } from '../openai/format';
import { parseInferenceRequest, type InferenceRequest } from '../openai/inference-request';
import { mediaKey } from '../openai/media';
import { serveGeneration } from '../openai/serve-generation';
import { vllmChatFormat, vllmCompletionFormat } from '../openai/vllm-format';
import type { BootstrapServer } from '../bootstrap/bootstrap-server';
import type { SimContext } from '../sim-context';
import type { EcStore } from './ec-store';
import type { KvBlockStore } from './kv-block-store';
import { pullKv, remotePrefillOf } from './kv-side-channel';
import { awaitMooncakeTransfer, mooncakeRemoteOf, mooncakeTransferIdOf } from './mooncake';
import { serveVllmEncode } from './vllm-encode';

export interface VllmDeps {
  readonly ctx: SimContext;
  /** Mooncake bootstrap server (prefill started with a bootstrap port). */
  readonly bootstrap: BootstrapServer | undefined;
  readonly ec: EcStore;
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
    if (ctx.role === 'encode') {
      await serveVllmEncode(deps, ex, request, requestId, model);
      return;
    }
    checkContextLength(ctx, request);
    const rankHeader = ex.req.headers['x-data-parallel-rank'];
    const rank = ctx.pickRank(typeof rankHeader === 'string' ? Number(rankHeader) : undefined);
    const prep = await prepare(deps, ex, request, rank, requestId);
    const plan = planOutput(request.outputKey, request);
    const spec: GenerationSpec = {
      rank, arrivedAt: ex.arrivedAt, promptTokens: request.promptTokens, cachedTokens: prep.cachedTokens, work: prep.work, plan,
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

function isRemoteDecodeRequest(params: unknown): boolean {
  return !!params && typeof params === 'object' && (params as Record<string, unknown>)['do_remote_decode'] === true;
}

/** Prefix-cache lookup, NIXL pull (decode) and EC lookups (EC consumer), in the order vLLM does them. */
async function prepare(deps: VllmDeps, ex: Exchange, request: InferenceRequest, rank: Rank, requestId: string): Promise<Preparation> {
  const { ctx } = deps;
  const prefixHit = rank.prefixCache.lookupAndInsert(request.promptText, request.promptTokens);
  ctx.metrics.prefixCache(rank, request.promptTokens, prefixHit);
  let transferTokens = 0;
  const params = request.body['kv_transfer_params'];
  const mooncake = mooncakeRemoteOf(params);
  const nixl = mooncake ? undefined : remotePrefillOf(params, requestId);
  if (mooncake || nixl) {
    const headers = traceHeaders(ex.req.headers);
    const pulled = mooncake ? await awaitMooncakeTransfer(ctx, mooncake, headers, ex.res) : await pullKv(ctx, nixl!, headers);
    if (pulled !== undefined) {
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
  const encodeItems = transferTokens > 0 ? 0 : encoderCacheMisses(deps, request, rank);
  const cachedTokens = prefixHit + transferTokens;
  return { cachedTokens, work: { computeTokens: Math.max(0, request.promptTokens - cachedTokens), encodeItems, transferTokens } };
}

/** EC consumer lookups (prefill and aggregated roles); returns how many items must be encoded locally. */
function encoderCacheMisses(deps: VllmDeps, request: InferenceRequest, rank: Rank): number {
  const { ctx } = deps;
  if (request.media.length === 0) return 0;
  if (ctx.role === 'decode') return request.media.length;
  let hits = 0;
  // Without a shared EC directory nothing can hit, so the keys (a sha256 each) are not computed.
  if (deps.ec.enabled) {
    for (const item of request.media) {
      if (deps.ec.has(mediaKey(item))) hits++;
    }
  }
  ctx.counters.inc('ecHits', hits);
  ctx.counters.inc('ecMisses', request.media.length - hits);
  ctx.metrics.mmCache(rank, request.media.length, hits);
  return request.media.length - hits;
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
