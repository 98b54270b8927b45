import { randomUUID } from 'node:crypto';
import { planFrom } from '../engine/continuation';
import type { GenerationSpec } from '../engine/generation';
import type { Rank } from '../engine/rank';
import { fnv1a, type OutputPlan } from '../engine/tokens';
import { EngineHttpError } from '../http/engine-error';
import type { Exchange, RouteHandler } from '../http/router';
import { sendJson, startEventStream } from '../http/respond';
import { checkContextLength, responseHeaders, traceHeaders } from '../openai/common';
import type { ResponseFormat, ResponseView } from '../openai/format';
import type { InferenceRequest, RequestKind } from '../openai/inference-request';
import { serveGeneration } from '../openai/serve-generation';
import { sglangChatFormat, sglangCompletionFormat, sglangGenerateFormat } from '../openai/sglang-format';
import type { SimContext } from '../sim-context';
import type { BootstrapServer } from '../bootstrap/bootstrap-server';
import { serveBatch, type BatchItem } from './batch-serve';
import { beamFormat, beamRefusal, groupPlan, planBeams } from './beam-search';
import { MISSING_ROOM_MESSAGE, pdFieldsOf, rankOfRoom, type BootstrapTarget } from './bootstrap-fields';
import { checkDpRank, prefillDpRankHint, requestedDpRank, resolveLoadBalanceMethod } from './dp-rank';
import { encodeOnEncoders } from './encoder-fanout';
import type { EncoderRegistry } from './encoder-registry';
import { sendDispatchedError, sglangErrorBody, type DispatchedErrorSource } from './late-error';
import { bootstrapTimeoutError, waitingTimeoutError, type DecodeTransfers } from './pd-transfer';
import type { PreallocatedKv } from './prealloc';
import { parseSglangRequest, type SglangRequest } from './sglang-request';

export interface SglangDeps {
  readonly ctx: SimContext;
  /** Prefill only: where computed rooms are registered. */
  readonly bootstrap?: BootstrapServer;
  /** Decode only: waits for the prefill's KV. */
  readonly transfers?: DecodeTransfers;
  /** Decode only: the blocks reserved for requests whose KV has not arrived. */
  readonly prealloc?: PreallocatedKv;
  /** Language-only server only. */
  readonly encoders?: EncoderRegistry;
  readonly bootstrapTimeoutMs: number;
}

const FORMATS: Record<RequestKind, ResponseFormat> = {
  chat: sglangChatFormat,
  completion: sglangCompletionFormat,
  generate: sglangGenerateFormat,
};

type Mode = 'prefill' | 'decode' | undefined;

/** Everything checked before SGLang dispatches a request; a failure here is a plain HTTP error. */
interface Admitted {
  readonly req: SglangRequest;
  readonly pinned: number | undefined;
  /** PD targets per item; `null` when a PD server got no room (the scheduler aborts it after dispatch). */
  readonly targets: readonly BootstrapTarget[] | null | undefined;
  readonly prefillRankHint: number | undefined;
}

function admit(ctx: SimContext, kind: RequestKind, ex: Exchange, mode: Mode): Admitted {
  const req = parseSglangRequest(kind, ex.body, ex.req.headers);
  for (const item of req.items) checkContextLength(ctx, item);
  if (req.n > 1 && mode === undefined && kind !== 'generate') {
    throw new EngineHttpError(400, 'n > 1 is not supported by the simulator outside PD mode', 'BadRequestError', 'n');
  }
  const pinned = requestedDpRank(ex.req.headers, req.body);
  const pd = mode ? pdFieldsOf(ex.rawBody, req.body, { size: req.items.length, batched: req.batched, samples: req.n }) : undefined;
  const targets = pd === undefined ? undefined : pd.ok ? pd.items : null;
  return { req, pinned, targets, prefillRankHint: mode === 'decode' ? prefillDpRankHint(req.body) : undefined };
}

/** The rank an item runs on: the pinned one, else the server's load-balance method (room-following or round robin). */
function rankFor(ctx: SimContext, pinned: number | undefined, target: BootstrapTarget | undefined): Rank {
  if (pinned !== undefined) return ctx.pickRank(pinned);
  const method = resolveLoadBalanceMethod(ctx.options.loadBalanceMethod, ctx.role);
  if (method === 'follow_bootstrap_room' && target && ctx.ranks.length > 1) return ctx.pickRank(rankOfRoom(target.room, ctx.ranks.length));
  return ctx.pickRank();
}

/** Resolves after `ms`, or when the client leaves (true). */
function waitOrLeave(ctx: SimContext, ex: Exchange, ms: number): Promise<boolean> {
  if (ex.res.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    const left = () => resolve(true);
    ex.res.once('close', left);
    void ctx.clock.sleep(ms).then(() => {
      ex.res.off('close', left);
      resolve(ex.res.destroyed);
    });
  });
}

/**
 * `POST /v1/chat/completions`, `/v1/completions` and `/generate` of a SGLang server in the unified, prefill or decode
 * mode, language-only or not. The order follows SGLang: HTTP-level validation (a plain 4xx), then the tokenizer's
 * checks (DP rank range), the encoder dispatch, the scheduler's PD checks (missing room), the KV hand-off and the
 * generation; once dispatched, a streamed request has its 200 and errors arrive as SSE events.
 */
export function sglangInferenceHandler(deps: SglangDeps, kind: RequestKind): RouteHandler {
  return async (ex: Exchange) => {
    const { ctx } = deps;
    const mode: Mode = ctx.role === 'prefill' || ctx.role === 'decode' ? ctx.role : undefined;
    let admitted: Admitted;
    try {
      admitted = admit(ctx, kind, ex, mode);
    } catch (err) {
      if (kind !== 'generate' || !(err instanceof EngineHttpError) || err.status !== 400) throw err;
      ctx.counters.inc('badRequests');
      sendJson(ex.res, 400, sglangErrorBody(kind, err));
      return;
    }
    const { req } = admitted;
    ctx.counters.inc('requests');
    const headers = responseHeaders(req.rids[0]);
    const range = checkDpRank(admitted.pinned, ctx.ranks.length);
    // SGLang's OpenAI routes wait for the first chunk before they answer 200, so a tokenizer ValueError is a plain 400;
    // `/generate` opens its stream at once.
    if ('error' in range && kind !== 'generate') {
      ctx.counters.inc('badRequests');
      sendJson(ex.res, 400, sglangErrorBody(kind, new EngineHttpError(400, range.error)), headers);
      return;
    }
    if (req.stream) startEventStream(ex.res, headers);
    const aborted = { rids: req.rids, promptTokens: req.items.map((item) => item.promptTokens), batched: req.batched };
    const failAs = (source: DispatchedErrorSource) => (err: EngineHttpError) => {
      if (err.status < 500) ctx.counters.inc('badRequests');
      sendDispatchedError(ex, kind, req.stream, source, err, aborted, headers);
    };
    const fail = failAs('abort');
    if ('error' in range) return failAs('tokenizer')(new EngineHttpError(400, range.error));
    // The scheduler fails the request after dispatch (`prepare_abort` with a 500), `delayMs` after the stream opened.
    if (ex.fault?.mode === 'error-in-stream') {
      if (ex.fault.delayMs > 0) await ctx.clock.sleep(ex.fault.delayMs);
      if (!ex.res.destroyed) fail(new EngineHttpError(500, 'simulated engine failure (fault error-in-stream)'));
      return;
    }
    // The scheduler validates a beam search before it queues the request (where a PD server checks the room).
    const beamError = req.beams && beamRefusal(mode !== undefined, req.beams);
    if (beamError) return fail(new EngineHttpError(400, beamError));
    if (admitted.targets === null) return fail(new EngineHttpError(400, `${MISSING_ROOM_MESSAGE}. req.rid='${req.rids[0]}'`));
    const targets = admitted.targets;
    if (req.n > 1 && targets) return holdParallelSamples(deps, ex, req, targets[0], fail);
    let localEncodes: readonly number[] = req.items.map(() => 0);
    if (deps.encoders) {
      const encoded = await encodeMedia(deps, ex, req).catch((err: unknown) =>
        err instanceof EngineHttpError ? err : new EngineHttpError(500, String(err)),
      );
      if (encoded instanceof EngineHttpError) return fail(encoded);
      localEncodes = encoded;
    }
    if (req.n > 1) {
      // Aggregated (a PD server holds n > 1 above): SGLang samples in parallel itself, and answers a batch.
      const samples = parallelSamples(deps, ex, req, range.rank, localEncodes);
      await serveBatch(ex, ctx.env, 'generate', samples, req.stream, headers);
      return;
    }
    const ranks = req.items.map((_, i) => rankFor(ctx, range.rank, targets?.[i]));
    let transferred: readonly number[] = req.items.map(() => 0);
    if (mode === 'decode' && targets) {
      const got = await awaitPrefills(deps, ex, req, targets, ranks, admitted.prefillRankHint);
      if (got instanceof EngineHttpError) return fail(got);
      if (got === undefined) return;
      transferred = got;
    }
    const items = req.items.map((item, i) => {
      const work = { rank: ranks[i], fromPrefill: transferred[i], localEncodes: localEncodes[i] };
      const generated = generationItem(deps, ex, kind, req.rids[i], item, work, targets?.[i]);
      return req.beams ? beamItem(generated, item, req.beams.returned) : generated;
    });
    if (!req.batched) {
      const only = items[0];
      const finish = () => {
        only.finish?.();
        return {};
      };
      const { spec, view } = only;
      const format = only.format ?? FORMATS[kind];
      await serveGeneration({ ex, env: ctx.env, spec, view, format, stream: req.stream, headers, finish });
      return;
    }
    await serveBatch(ex, ctx.env, kind === 'generate' ? 'generate' : 'completion', items, req.stream, headers);
  };
}

/** Prefix-cache lookup, output plan and response labels of one item; a PD prefill registers its room when done. */
interface ItemWork {
  readonly rank: Rank;
  /** Prompt tokens the prefill computed (decode). */
  readonly fromPrefill: number;
  /** Media items encoded locally (language-only server without encoders). */
  readonly localEncodes: number;
}

function generationItem(
  deps: SglangDeps,
  ex: Exchange,
  kind: RequestKind,
  id: string,
  request: InferenceRequest,
  work: ItemWork,
  target: BootstrapTarget | undefined,
): BatchItem {
  const { ctx } = deps;
  const { rank, localEncodes } = work;
  const transferred = Math.min(work.fromPrefill, request.promptTokens - 1);
  const prefixHit = transferred > 0 ? 0 : rank.prefixCache.lookup(request);
  ctx.metrics.prefixCache(rank, request.promptTokens, prefixHit);
  const cachedTokens = Math.max(prefixHit, transferred);
  // A PD prefill computes the prompt and the first token only; its answer is read and thrown away by the router.
  const plan: OutputPlan =
    ctx.role === 'prefill'
      ? { count: 1, finishReason: 'length' }
      : planFrom({ key: request.outputKey, offset: request.outputOffset }, request);
  const spec: GenerationSpec = {
    rank,
    arrivedAt: ex.arrivedAt,
    promptTokens: request.promptTokens,
    cachedTokens,
    work: { computeTokens: request.promptTokens - cachedTokens, encodeItems: localEncodes, transferTokens: transferred },
    plan,
  };
  const view: ResponseView = {
    id,
    created: Math.floor(Date.now() / 1000),
    model: request.model ?? (kind === 'generate' ? ctx.model : 'default'),
    promptTokens: request.promptTokens,
    cachedTokens,
    outputKey: request.outputKey,
    outputOffset: request.outputOffset,
    plan,
    includeUsage: request.includeUsage,
    continuousUsage: request.continuousUsage,
    elapsedSec: () => (performance.now() - ex.arrivedAt) / 1000,
  };
  const { bootstrap } = deps;
  if (ctx.role !== 'prefill' || !target || !bootstrap) return { spec, view };
  return {
    spec,
    view,
    finish: () => {
      bootstrap.registerRoom(target.room, request.promptTokens, rank.index);
      // A decode can derive a room-following prefill's rank itself; for the others it asks.
      if (ctx.ranks.length > 1 && resolveLoadBalanceMethod(ctx.options.loadBalanceMethod, ctx.role) !== 'follow_bootstrap_room') {
        bootstrap.registerRoomRank(target.room, rank.index);
      }
      ctx.counters.inc('roomsRegistered');
    },
  };
}

/**
 * A prompt's beam search on an aggregated server: it runs as long as its longest returned beam (the group's rows
 * decode in lockstep) and answers with the beams (`beam-search.ts`).
 */
function beamItem(item: BatchItem, request: InferenceRequest, returned: number): BatchItem {
  const beams = planBeams(request, returned);
  const plan = groupPlan(beams);
  return { ...item, spec: { ...item.spec, plan }, view: { ...item.view, plan }, format: beamFormat(beams) };
}

/**
 * `n > 1` on an aggregated server, as SGLang's `_handle_batch_request` runs parallel sampling: each prompt first goes
 * to the scheduler once with `max_new_tokens` 0, which puts its prefix in the radix cache, then `n` times, each copy
 * under a fresh rid (`regenerate_rid`: a uuid hex), all dispatched on their own. Sample `j` of prompt `i` is output
 * `i * n + j` (prompt-major), the answer a list even for one prompt (the request became a batch), each output with
 * its own `meta_info` (the prompt's `prompt_tokens`, its own `completion_tokens`). Upstream samples every copy on its
 * own, so the outputs differ: sample 0 is the prompt's one-sample output, sample `j` is keyed by `j` as well.
 */
function parallelSamples(
  deps: SglangDeps,
  ex: Exchange,
  req: SglangRequest,
  pinned: number | undefined,
  localEncodes: readonly number[],
): BatchItem[] {
  const { ctx } = deps;
  const samples: BatchItem[] = [];
  for (const [i, prompt] of req.items.entries()) {
    // The prefix-caching request: prefilled, nothing generated (its answer is awaited and dropped upstream).
    const primer = rankFor(ctx, pinned, undefined);
    ctx.metrics.prefixCache(primer, prompt.promptTokens, primer.prefixCache.lookup(prompt));
    for (let j = 0; j < req.n; j++) {
      const sample = j === 0 ? prompt : { ...prompt, outputKey: fnv1a(`sample ${j}`, prompt.outputKey) };
      // Media is encoded once per prompt (the samples copy the tokenized request): the first sample pays for it.
      const work = { rank: rankFor(ctx, pinned, undefined), fromPrefill: 0, localEncodes: j === 0 ? localEncodes[i] : 0 };
      samples.push(generationItem(deps, ex, 'generate', randomUUID().replace(/-/g, ''), sample, work, undefined));
    }
  }
  return samples;
}

/**
 * Language-only server: each item's media goes to a snapshot of the registry. With no encoder registered SGLang
 * logs a warning and runs the request without EPD: encoded locally when the model kept its vision tower (counted in
 * `localEncodes`, paid in the prefill latency), else the request fails.
 */
async function encodeMedia(deps: SglangDeps, ex: Exchange, req: SglangRequest): Promise<number[]> {
  const { ctx, encoders } = deps;
  const local = req.items.map(() => 0);
  if (!encoders) return local;
  for (const [i, item] of req.items.entries()) {
    if (item.media.length === 0) continue;
    const rid = req.rids[i];
    const urls = encoders.list();
    if (urls.length > 0) {
      await encodeOnEncoders(ctx, urls, item.media, rid, traceHeaders(ex.req.headers));
      continue;
    }
    ctx.logger?.warn({ rid }, `No encoder URLs available for request ${rid}; processing without encoder disaggregation.`);
    if (ctx.options.visionTower === false) {
      const message =
        'No encoder is registered and the language-only model has no vision tower: ' +
        `cannot process the multimodal inputs of request ${rid}`;
      throw new EngineHttpError(500, message, 'InternalServerError');
    }
    ctx.counters.inc('localEncodes', item.media.length);
    local[i] = item.media.length;
  }
  return local;
}

/**
 * Decode: waits for every item's KV from its prefill (concurrently). Returns the prompt tokens each prefill computed,
 * the error to answer with, or undefined when the client left.
 */
async function awaitPrefills(
  deps: SglangDeps,
  ex: Exchange,
  req: SglangRequest,
  targets: readonly BootstrapTarget[],
  ranks: readonly Rank[],
  hint: number | undefined,
): Promise<number[] | EngineHttpError | undefined> {
  const { ctx, transfers } = deps;
  if (!transfers) return targets.map(() => 0);
  const abort = new AbortController();
  ex.res.once('close', () => abort.abort());
  const trace = traceHeaders(ex.req.headers);
  const results = await Promise.all(
    targets.map(async (target, i) => {
      const rank = ranks[i];
      ctx.metrics.transferWaiting(rank, 1);
      // Reserved while waiting; once the KV is in, the blocks belong to the running request.
      const release = deps.prealloc?.reserve(req.items[i].promptTokens);
      try {
        return await transfers.await(target, req.rids[i], hint, trace, abort.signal);
      } finally {
        release?.();
        ctx.metrics.transferWaiting(rank, -1);
      }
    }),
  );
  if (abort.signal.aborted) {
    ctx.counters.inc('aborted');
    return undefined;
  }
  const failed = results.find((r) => !r.ok);
  if (failed && !failed.ok) {
    ctx.counters.inc('bootstrapTimeouts');
    return failed.error;
  }
  ctx.counters.inc('roomsMatched', results.length);
  return results.map((r) => (r.ok ? r.promptTokens : 0));
}

/**
 * `n > 1` on a PD server: SGLang expands the samples but sends them all on one room, so prefill and decode never
 * pair and the request hangs until the waiting timeout, then fails with 500 (upstream through at least 0.5.18).
 */
async function holdParallelSamples(
  deps: SglangDeps,
  ex: Exchange,
  req: SglangRequest,
  target: BootstrapTarget,
  fail: (err: EngineHttpError) => void,
): Promise<void> {
  const { ctx, bootstrapTimeoutMs } = deps;
  ctx.counters.inc('parallelSamplingHangs');
  if (await waitOrLeave(ctx, ex, bootstrapTimeoutMs)) {
    ctx.counters.inc('aborted');
    return;
  }
  const rid = req.rids[0];
  const timedOut = ctx.role === 'decode' ? waitingTimeoutError : bootstrapTimeoutError;
  fail(timedOut(rid, target.room, bootstrapTimeoutMs));
}
