import type { Rank } from '../engine/rank';
import type { Exchange } from '../http/router';
import { startEventStream } from '../http/respond';
import { responseHeaders, traceHeaders } from '../openai/common';
import { streamErrorEvents } from '../http/engine-error';
import type { InferenceRequest } from '../openai/inference-request';
import type { SimContext } from '../sim-context';
import { ecParamsOf, EcUnavailableError, GENERATION_ERROR, type EcConnector } from './ec-connector';
import { distinctItems, type MmFeature } from './mm-features';

const NOTHING: ReadonlySet<string> = new Set();

/**
 * How many distinct items the engine must encode itself before computing the prompt. An EC consumer (prefill,
 * both) first asks its connector for each item; a decode has no EC connector. An item that is neither acquired
 * nor encodable (the request holds only its metadata reference) fails the request, as in vLLM.
 */
export async function localEncodesNeeded(
  ctx: SimContext,
  ec: EcConnector,
  ex: Exchange,
  request: InferenceRequest,
  features: readonly MmFeature[],
  rank: Rank,
  requestId: string,
): Promise<number> {
  return (await itemsToEncode(ctx, ec, ex, request, features, rank, requestId)).size;
}

/** The identifiers of the distinct items the engine must encode itself (see `localEncodesNeeded`). */
export async function itemsToEncode(
  ctx: SimContext,
  ec: EcConnector,
  ex: Exchange,
  request: InferenceRequest,
  features: readonly MmFeature[],
  rank: Rank,
  requestId: string,
): Promise<ReadonlySet<string>> {
  if (features.length === 0) return NOTHING;
  const items = distinctItems(features);
  let acquired = NOTHING;
  if (ctx.role !== 'decode') {
    const abort = new AbortController();
    ex.res.once('close', () => abort.abort());
    // The client may be gone already (it left while a KV pull was in progress).
    if (ex.res.destroyed || ex.req.socket.destroyed) abort.abort();
    const onWait = () => {
      // vLLM's server has answered 200 and opened the stream before the engine waits for anything.
      if (request.stream && !ex.res.headersSent) startEventStream(ex.res, responseHeaders(requestId));
    };
    const params = ecParamsOf(request.body);
    acquired = await ec.acquire(items, { params, requestId, rank, headers: traceHeaders(ex.req.headers), signal: abort.signal, onWait });
    ctx.counters.inc('ecHits', acquired.size);
    ctx.counters.inc('ecMisses', items.length - acquired.size);
    ctx.metrics.mmCache(rank, items.length, acquired.size);
  }
  const missing = items.filter((i) => !acquired.has(i.feature.identifier));
  const unencodable = missing.find((i) => !i.feature.localInput);
  if (unencodable) {
    const id = unencodable.feature.identifier;
    throw new EcUnavailableError(`item ${id} arrived as a metadata reference and its encoding could not be had`);
  }
  ctx.counters.inc('localEncodes', missing.length);
  return new Set(missing.map((i) => i.feature.identifier));
}

/**
 * Answers a request whose encoding could not be had the way vLLM answers a request that finished with an error:
 * 500 `Internal server error` before any byte, or, when the stream was already open, an error event and `[DONE]`.
 */
export function failUnavailable(
  ctx: SimContext,
  ex: Exchange,
  err: EcUnavailableError,
  request: InferenceRequest,
  requestId: string,
): void {
  if (ex.res.destroyed) {
    // The client left while the request waited for a transfer: an abort, not a failed hand-off.
    ctx.counters.inc('aborted');
    return;
  }
  ctx.counters.inc('ecRequestsFailed');
  ctx.logger?.debug({ requestId, reason: err.reason }, 'EC hand-off failed; request finished with an error');
  if (!request.stream) throw GENERATION_ERROR;
  if (!ex.res.headersSent) startEventStream(ex.res, responseHeaders(requestId));
  ex.res.end(streamErrorEvents('vllm', GENERATION_ERROR));
}
