import type { OutgoingHttpHeaders } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { GenerationSpec } from '../engine/generation';
import type { Rank } from '../engine/rank';
import { planOutput, type OutputPlan } from '../engine/tokens';
import { EngineHttpError, streamErrorEvents } from '../http/engine-error';
import type { Exchange, RouteHandler } from '../http/router';
import { startEventStream, sendJson } from '../http/respond';
import { errorBody } from '../http/engine-error';
import { checkContextLength, responseHeaders, traceHeaders } from '../openai/common';
import type { ResponseFormat, ResponseView } from '../openai/format';
import { parseInferenceRequest, type InferenceRequest, type RequestKind } from '../openai/inference-request';
import { serveGeneration } from '../openai/serve-generation';
import { sglangChatFormat, sglangCompletionFormat, sglangGenerateFormat } from '../openai/sglang-format';
import type { SimContext } from '../sim-context';
import { bootstrapFieldsOf, rankOfRoom, type BootstrapFields } from './bootstrap-fields';
import type { BootstrapServer } from '../bootstrap/bootstrap-server';
import { ROOM_WAIT_PATH } from '../bootstrap/bootstrap-server';
import { httpBase, waitForHandoff } from '../bootstrap/handoff-wait';
import { encodeOnEncoders } from './encoder-fanout';
import type { EncoderRegistry } from './encoder-registry';

export interface SglangDeps {
  readonly ctx: SimContext;
  /** Prefill only: where computed rooms are registered. */
  readonly bootstrap?: BootstrapServer;
  /** Language-only prefill only. */
  readonly encoders?: EncoderRegistry;
  readonly bootstrapTimeoutMs: number;
}

const FORMATS: Record<RequestKind, ResponseFormat> = {
  chat: sglangChatFormat, completion: sglangCompletionFormat, generate: sglangGenerateFormat,
};

function ridOf(ex: Exchange, request: InferenceRequest): string {
  const rid = request.body['rid'];
  if (typeof rid === 'string' && rid.length > 0) return rid;
  const header = ex.req.headers['x-request-id'];
  return typeof header === 'string' && header.length > 0 ? header : randomUUID().replace(/-/g, '');
}

function pickRank(ctx: SimContext, request: InferenceRequest, fields: BootstrapFields | undefined): Rank {
  const pinned = request.body['routed_dp_rank'] ?? request.body['data_parallel_rank'];
  if (typeof pinned === 'number') return ctx.pickRank(pinned);
  return ctx.pickRank(fields && ctx.ranks.length > 1 ? rankOfRoom(fields.room, ctx.ranks.length) : undefined);
}

/** `POST /v1/chat/completions`, `/v1/completions` and `/generate` of a SGLang server in the unified, prefill or decode mode. */
export function sglangInferenceHandler(deps: SglangDeps, kind: RequestKind): RouteHandler {
  const format = FORMATS[kind];
  let encodeStart = 0;
  return async (ex: Exchange) => {
    const { ctx } = deps;
    const request = parseInferenceRequest(kind, ex.body, 'sglang');
    checkContextLength(ctx, request);
    const mode = ctx.role === 'prefill' || ctx.role === 'decode' ? ctx.role : undefined;
    const fields = mode ? bootstrapFieldsOf(ex.rawBody, request.body, mode) : undefined;
    ctx.counters.inc('requests');
    const rid = ridOf(ex, request);
    const rank = pickRank(ctx, request, fields);
    const headers = responseHeaders(rid);
    if (deps.encoders && request.media.length > 0) {
      await encodeOnEncoders(
        ctx, deps.encoders, request.media, rid, request.body['epd_bootstrap_addr'], traceHeaders(ex.req.headers), encodeStart++,
      );
    }
    let transferred = 0;
    if (mode === 'decode' && fields) {
      const ok = await awaitPrefill(deps, ex, request, fields, rank, headers);
      if (ok === undefined) return;
      transferred = Math.min(ok, request.promptTokens - 1);
    }
    const prefixHit = transferred > 0 ? 0 : rank.prefixCache.lookupAndInsert(request.promptText, request.promptTokens);
    ctx.metrics.prefixCache(rank, request.promptTokens, prefixHit);
    const cachedTokens = Math.max(prefixHit, transferred);
    // A PD prefill computes the prompt and the first token only; its answer is read and thrown away by the router.
    const plan: OutputPlan = mode === 'prefill' ? { count: 1, finishReason: 'length' } : planOutput(request.outputKey, request);
    const spec: GenerationSpec = {
      rank,
      arrivedAt: ex.arrivedAt,
      promptTokens: request.promptTokens,
      cachedTokens,
      work: { computeTokens: request.promptTokens - cachedTokens, encodeItems: 0, transferTokens: transferred },
      plan,
    };
    const view: ResponseView = {
      id: rid,
      created: Math.floor(Date.now() / 1000),
      model: request.model ?? (kind === 'generate' ? ctx.model : 'default'),
      promptTokens: request.promptTokens,
      cachedTokens,
      outputKey: request.outputKey,
      plan,
      includeUsage: request.includeUsage,
      continuousUsage: request.continuousUsage,
      elapsedSec: () => (performance.now() - ex.arrivedAt) / 1000,
    };
    await serveGeneration({
      ex,
      env: ctx.env,
      spec,
      view,
      format,
      stream: request.stream,
      headers,
      finish: () => {
        if (mode === 'prefill' && fields && deps.bootstrap) {
          deps.bootstrap.registerRoom(fields.room, request.promptTokens);
          ctx.counters.inc('roomsRegistered');
        }
        return {};
      },
    });
  };
}

/**
 * Decode: waits for the prefill to have computed the room. On timeout it fails like SGLang's decode does when the
 * KV never arrives: 500 for a plain request, an error event inside an already-started stream.
 */
async function awaitPrefill(
  deps: SglangDeps, ex: Exchange, request: InferenceRequest, fields: BootstrapFields, rank: Rank, headers: OutgoingHttpHeaders,
): Promise<number | undefined> {
  const { ctx } = deps;
  // SGLang answers streams with 200 at once and reports a failed transfer inside the stream.
  if (request.stream) startEventStream(ex.res, headers);
  const abort = new AbortController();
  ex.res.once('close', () => abort.abort());
  ctx.metrics.transferWaiting(rank, 1);
  const result = await waitForHandoff(
    ctx, httpBase(fields.host, fields.port), `${ROOM_WAIT_PATH}${fields.room}`, deps.bootstrapTimeoutMs, traceHeaders(ex.req.headers),
    abort.signal,
  ).finally(() => ctx.metrics.transferWaiting(rank, -1));
  if (result.ok) {
    ctx.counters.inc('roomsMatched');
    return result.promptTokens;
  }
  if (abort.signal.aborted) {
    ctx.counters.inc('aborted');
    return undefined;
  }
  ctx.counters.inc('bootstrapTimeouts');
  const err = new EngineHttpError(
    500,
    `Decode transfer failed for request rank=0 req.rid='${ridOf(ex, request)}' req.bootstrap_room=${fields.room} with exception ` +
      `KVTransferError(bootstrap_room=${fields.room}): ` +
      `Request timed out after ${deps.bootstrapTimeoutMs / 1000}s in KVPoll.WaitingForInput (${result.reason})`,
    'InternalServerError',
  );
  if (ex.res.destroyed) return undefined;
  if (request.stream) ex.res.end(streamErrorEvents('sglang', err));
  else sendJson(ex.res, 500, errorBody('sglang', err), headers);
  return undefined;
}
