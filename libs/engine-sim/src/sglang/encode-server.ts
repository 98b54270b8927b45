import type { Exchange, RouteHandler } from '../http/router';
import { sendJson } from '../http/respond';
import type { SimContext } from '../sim-context';

const MODALITIES = new Set(['IMAGE', 'VIDEO', 'AUDIO']);

/** An `mm_items` entry: a URL (or data URI), or `{url, …per-media options}` when the request set options. */
function validItem(item: unknown): boolean {
  if (typeof item === 'string') return item.length > 0;
  return !!item && typeof item === 'object' && !Array.isArray(item) && typeof (item as { url?: unknown }).url === 'string';
}

/**
 * SGLang `--encoder-only` `POST /encode`, the body a language-only server's receiver sends:
 * `{encoder_idx, encoder_url, mm_items, num_parts, part_idx, req_id, modality, prefill_host, embedding_port,
 * time_stats_json}`. Pays the encode cost per item and answers `null`, as the zmq_to_scheduler backend does (the
 * embeddings would then be pushed over ZMQ to the ranks that registered with `/scheduler_receive_url`).
 */
export function encodeHandler(ctx: SimContext): RouteHandler {
  return async (ex: Exchange) => {
    const body = ex.body.ok ? (ex.body.value as Record<string, unknown> | undefined) : undefined;
    const reqId = body && typeof body['req_id'] === 'string' ? body['req_id'] : null;
    const items = body?.['mm_items'];
    const modality = body?.['modality'];
    const validItems = Array.isArray(items) && items.length > 0 && items.every(validItem);
    if (!body || !validItems || reqId === null || (modality !== undefined && !MODALITIES.has(String(modality)))) {
      ctx.counters.inc('badRequests');
      const message = 'invalid encode request: mm_items (URLs or {url, ...} objects), req_id and modality are required';
      sendJson(ex.res, 400, JSON.stringify({ status: 'error', message, req_id: reqId }));
      return;
    }
    ctx.counters.inc('requests');
    const rank = ctx.pickRank();
    if (!rank.tryAdmit(0)) await rank.enqueue(0).admitted;
    try {
      await ctx.clock.sleep(ctx.latency.zero ? 0 : items.length * ctx.latency.encodeMsPerItem);
    } finally {
      rank.release(0);
    }
    ctx.counters.inc('encodes', items.length);
    ctx.counters.inc('encoderItemsServed', items.length);
    sendJson(ex.res, 200, 'null');
  };
}

/** `POST /scheduler_receive_url`: where a scheduler rank wants the embeddings; accepted and ignored. */
export function schedulerReceiveUrlHandler(): RouteHandler {
  return (ex) => sendJson(ex.res, 200, 'null');
}
