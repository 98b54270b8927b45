import type { Exchange, RouteHandler } from '../http/router';
import { sendJson } from '../http/respond';
import type { SimContext } from '../sim-context';

const MODALITIES = new Set(['IMAGE', 'VIDEO', 'AUDIO']);

/**
 * SGLang `--encoder-only` `POST /encode` (MMReceiver body, docs/protocols/sglang.md): pays the encode cost per item and
 * answers `null`, as the zmq_to_scheduler backend does (the embeddings would then be pushed over ZMQ).
 */
export function encodeHandler(ctx: SimContext): RouteHandler {
  return async (ex: Exchange) => {
    const body = ex.body.ok ? (ex.body.value as Record<string, unknown> | undefined) : undefined;
    const reqId = body && typeof body['req_id'] === 'string' ? body['req_id'] : null;
    const items = body?.['mm_items'];
    const modality = body?.['modality'];
    if (!body || !Array.isArray(items) || items.length === 0 || items.some((i) => typeof i !== 'string') || reqId === null ||
        (modality !== undefined && !MODALITIES.has(String(modality)))) {
      ctx.counters.inc('badRequests');
      sendJson(
        ex.res, 400,
        JSON.stringify({
          status: 'error', message: 'invalid encode request: mm_items (strings), req_id and modality are required', req_id: reqId,
        }),
      );
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
    sendJson(ex.res, 200, 'null');
  };
}

/** `POST /scheduler_receive_url`: where a scheduler rank wants the embeddings; accepted and ignored. */
export function schedulerReceiveUrlHandler(): RouteHandler {
  return (ex) => sendJson(ex.res, 200, 'null');
}
