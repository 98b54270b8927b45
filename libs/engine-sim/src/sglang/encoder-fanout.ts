import { request } from 'undici';
import { EngineHttpError } from '../http/engine-error';
import type { MediaItem, Modality } from '../openai/media';
import type { SimContext } from '../sim-context';

/** One `/encode` call: a group of same-modality items for one encoder. */
export interface EncodePart {
  readonly encoderIdx: number;
  readonly modality: Modality;
  readonly items: readonly MediaItem[];
}

const ENCODE_TIMEOUT_MS = 60_000;

/** A random order of encoder indices (SGLang shuffles them per request). */
export function shuffledOrder(n: number, random: () => number = Math.random): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

/**
 * Splits a request's items over `encoders` encoders the way SGLang's receiver does (`_assign_items_by_modality`):
 * per modality in order of first appearance, `n // E` items each plus one more for the first `n % E` encoders of
 * the shuffled `order`, the offset carried across modalities so remainders land on different encoders. Each
 * encoder gets a contiguous slice of the modality's items; parts are numbered modality by modality.
 */
export function splitAcrossEncoders(media: readonly MediaItem[], encoders: number, order: readonly number[]): EncodePart[] {
  const modalities = [...new Set(media.map((m) => m.modality))];
  const parts: EncodePart[] = [];
  let offset = 0;
  for (const modality of modalities) {
    const items = media.filter((m) => m.modality === modality);
    const base = Math.floor(items.length / encoders);
    const remainder = items.length % encoders;
    const assigned = new Array<number>(encoders).fill(0);
    for (let i = 0; i < encoders; i++) assigned[order[(offset + i) % encoders]] = base + (i < remainder ? 1 : 0);
    offset = (offset + remainder) % encoders;
    let taken = 0;
    assigned.forEach((count, encoderIdx) => {
      if (count === 0) return;
      parts.push({ encoderIdx, modality, items: items.slice(taken, taken + count) });
      taken += count;
    });
  }
  return parts;
}

/** An item as the receiver sends it: the bare URL, or `{url, …options}` when the request carried per-media options. */
function wireItem(item: MediaItem): unknown {
  return item.options ? { url: item.source, ...item.options } : item.source;
}

/**
 * Language-only server: POSTs `/encode` to the encoders of a registry snapshot (zmq_to_scheduler body,
 * `embedding_port: null`) and waits for all of them. A failing encoder fails the request with the encoder's status
 * (500 when it could not be reached), as the receiver aborts it in SGLang.
 */
export async function encodeOnEncoders(
  ctx: SimContext,
  urls: readonly string[],
  media: readonly MediaItem[],
  rid: string,
  headers: Record<string, string>,
): Promise<void> {
  const parts = splitAcrossEncoders(media, urls.length, shuffledOrder(urls.length));
  ctx.counters.inc('encoderCalls', parts.length);
  const calls = parts.map(async (part, partIdx) => {
    const url = urls[part.encoderIdx];
    const res = await request(`${url}/encode`, {
      method: 'POST',
      dispatcher: ctx.http,
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({
        encoder_idx: part.encoderIdx,
        encoder_url: url,
        mm_items: part.items.map(wireItem),
        num_parts: parts.length,
        part_idx: partIdx,
        req_id: `${rid}_local_part_${partIdx}`,
        modality: part.modality,
        prefill_host: ctx.advertiseHost,
        embedding_port: null,
        time_stats_json: null,
      }),
      headersTimeout: ENCODE_TIMEOUT_MS,
      bodyTimeout: ENCODE_TIMEOUT_MS,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) {
      throw new EngineHttpError(res.statusCode >= 400 ? res.statusCode : 500, `encoder ${url} answered ${res.statusCode}: ${text}`);
    }
  });
  const results = await Promise.allSettled(calls);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    ctx.counters.inc('encoderFailures');
    const reason = failed.reason as Error;
    throw new EngineHttpError(reason instanceof EngineHttpError ? reason.status : 500, `Encoder request failed: ${reason.message}`);
  }
}
