import { request } from 'undici';
import { EngineHttpError } from '../http/engine-error';
import type { MediaItem, Modality } from '../openai/media';
import type { SimContext } from '../sim-context';
import type { EncoderRegistry } from './encoder-registry';

/** One `/encode` call: a group of same-modality items for one encoder. */
interface EncodePart {
  readonly url: string;
  readonly encoderIdx: number;
  readonly modality: Modality;
  readonly items: string[];
}

const ENCODE_TIMEOUT_MS = 60_000;

/**
 * Splits the items across encoders the way SGLang's MMReceiverHTTP does: per modality, counts balanced over the
 * encoders with a rotating start, one part per (modality, encoder) that got items.
 */
function splitAcrossEncoders(media: readonly MediaItem[], urls: readonly string[], start: number): EncodePart[] {
  const parts: EncodePart[] = [];
  const byModality = new Map<Modality, string[]>();
  for (const item of media) {
    const list = byModality.get(item.modality) ?? [];
    list.push(item.source);
    byModality.set(item.modality, list);
  }
  for (const [modality, items] of byModality) {
    const groups = urls.map(() => [] as string[]);
    items.forEach((src, i) => groups[(start + i) % urls.length]!.push(src));
    groups.forEach((group, idx) => {
      if (group.length > 0) parts.push({ url: urls[idx] as string, encoderIdx: idx, modality, items: group });
    });
  }
  return parts;
}

async function encoderUrls(ctx: SimContext, registry: EncoderRegistry, epdBootstrapAddr: unknown): Promise<readonly string[]> {
  if (typeof epdBootstrapAddr !== 'string' || epdBootstrapAddr.length === 0) return registry.list();
  // `epd_bootstrap_addr` names the prefill whose encoder group serves this request (nEmP topologies).
  const res = await request(
    `${epdBootstrapAddr.replace(/\/+$/, '')}/list_encoder_urls`, { dispatcher: ctx.http, headersTimeout: ENCODE_TIMEOUT_MS },
  );
  const body = (await res.body.json()) as { encoder_urls?: unknown };
  if (res.statusCode !== 200 || !Array.isArray(body.encoder_urls)) throw new EngineHttpError(
    500, `cannot read encoder urls from epd_bootstrap_addr ${epdBootstrapAddr}`,
  );
  return body.encoder_urls.filter((u): u is string => typeof u === 'string');
}

/**
 * Language-only prefill: POSTs `/encode` to the encoders (zmq_to_scheduler body, `embedding_port: null`) and waits
 * for all of them; any failure fails the request, as the receiver aborts it in SGLang.
 */
export async function encodeOnEncoders(
  ctx: SimContext,
  registry: EncoderRegistry,
  media: readonly MediaItem[],
  rid: string,
  epdBootstrapAddr: unknown,
  headers: Record<string, string>,
  start: number,
): Promise<void> {
  const urls = await encoderUrls(ctx, registry, epdBootstrapAddr);
  if (urls.length === 0) throw new EngineHttpError(
    500, 'No encoder urls available: the language-only server has no registered encoder for this multimodal request',
  );
  const parts = splitAcrossEncoders(media, urls, start);
  ctx.counters.inc('encoderCalls', parts.length);
  const calls = parts.map(async (part, partIdx) => {
    const res = await request(`${part.url}/encode`, {
      method: 'POST',
      dispatcher: ctx.http,
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({
        encoder_idx: part.encoderIdx,
        mm_items: part.items,
        num_parts: parts.length,
        part_idx: partIdx,
        req_id: `${rid}_local_part_${partIdx}`,
        modality: part.modality,
        prefill_host: ctx.advertiseHost,
        embedding_port: null,
      }),
      headersTimeout: ENCODE_TIMEOUT_MS,
      bodyTimeout: ENCODE_TIMEOUT_MS,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`encoder ${part.url} answered ${res.statusCode}: ${text}`);
  });
  const results = await Promise.allSettled(calls);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    ctx.counters.inc('encoderFailures');
    throw new EngineHttpError(500, `Encoder request failed: ${(failed.reason as Error).message}`);
  }
}
