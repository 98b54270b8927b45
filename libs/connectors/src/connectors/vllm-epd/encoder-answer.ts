import type { EndpointRef } from '@triad/bus';
import { EcHandoffError, type EcHandoffFailureReason } from '@triad/request';

/** What an encoder reported for one item of its request. */
export interface EncodedItem {
  /** The encoder's own key of the item (vLLM `mm_hash`, the answer's key): how the consumer looks it up. */
  readonly ecHash: string;
  /** The encoder's whole entry (metadata, `item_indices`, connector handles such as NIXL's peer and size). */
  readonly entry: Readonly<Record<string, unknown>>;
  /**
   * The placeholder metadata (`{"image_grid_thw": [1, h, w]}`), each field flattened one level as the consumer's
   * `*_embeds` part takes it; undefined when the encoder reported none (e.g. a processor-cache hit).
   */
  readonly metadata: Readonly<Record<string, unknown[]>> | undefined;
}

/** One item of an encoder request, as the matching needs it. */
export interface SentItem {
  /** Index among the request's media items (for errors). */
  readonly index: number;
  readonly uuid: string;
  readonly transferId: string | undefined;
  /** A video with `mm_processor_kwargs.use_audio_in_video`: the encoder reports its video and audio separately. */
  readonly videoWithAudio: boolean;
}

type Entry = Record<string, unknown>;

const isObject = (v: unknown): v is Entry => v !== null && typeof v === 'object' && !Array.isArray(v);

function fail(reason: EcHandoffFailureReason, encoder: EndpointRef, item: number, what: string): EcHandoffError {
  return new EcHandoffError(
    reason,
    `encode of item ${item} on ${encoder.key}: ${what}`,
    { stage: 'encode', endpoint: encoder.key, item, status: 200 },
    false,
  );
}

/** The metadata fields of an entry, flattened one level (`[[1,h,w]]` → `[1,h,w]`); undefined when empty. */
function flatMetadata(entry: Entry, encoder: EndpointRef, item: number): Record<string, unknown[]> | undefined {
  const metadata = entry['metadata'];
  if (metadata === undefined || metadata === null) return undefined;
  if (!isObject(metadata)) throw fail('invalid_encoder_answer', encoder, item, 'the encoder reported metadata that is not an object');
  let out: Record<string, unknown[]> | undefined;
  for (const [field, value] of Object.entries(metadata)) {
    if (!Array.isArray(value)) {
      throw fail('invalid_encoder_answer', encoder, item, `the encoder reported metadata field '${field}' that is not a list`);
    }
    (out ??= {})[field] = flattened(value);
  }
  return out;
}

/**
 * `list.flatMap((v) => (Array.isArray(v) ? v : [v]))` by hand: `flatMap` costs several thousand instructions more
 * for a three-number list, and returns a holey array, which `JSON.stringify` reads element by element through its
 * slow path when the consumer bodies are written.
 */
function flattened(list: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  for (const v of list) {
    if (!Array.isArray(v)) out.push(v);
    else for (let i = 0; i < v.length; i++) out.push(v[i]);
  }
  return out;
}

/** The entries of an `ec_transfer_params` answer: keyed by hash, or the older `{"ec_items": [...]}` list. */
function entriesOf(params: Entry, encoder: EndpointRef, first: number): [string, Entry][] {
  const list = params['ec_items'];
  if (Array.isArray(list) && Object.keys(params).length === 1) {
    return list.map((e: unknown, i) => {
      if (!isObject(e) || typeof e['mm_hash'] !== 'string' || e['mm_hash'] === '') {
        throw fail('invalid_encoder_answer', encoder, first, `the encoder's ec_items[${i}] names no mm_hash`);
      }
      return [e['mm_hash'], e];
    });
  }
  return Object.entries(params).map(([hash, e]) => {
    if (!isObject(e)) throw fail('invalid_encoder_answer', encoder, first, `the encoder's entry '${hash}' is not an object`);
    return [hash, e];
  });
}

/**
 * Matches an encoder's answer to the items it was sent (vLLM's EPD proxy rules, plus the older list shape): an
 * entry's `item_indices` name positions in the request; otherwise an entry keyed by the uuid sent; otherwise, in the
 * list shape, the entry carrying the item's transfer id; otherwise, for a lone item, the only entry. Returns one
 * result per item (undefined: keep the item raw; only for an answer without `ec_transfer_params`, or a video whose
 * audio the encoder split off). Throws an {@link EcHandoffError} naming the item on a body that is not JSON,
 * malformed params, an index out of range or repeated, or an item no entry matches.
 */
export function matchEncoderAnswer(body: Buffer, sent: readonly SentItem[], encoder: EndpointRef): (EncodedItem | undefined)[] {
  const first = sent[0].index;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw fail('invalid_encoder_answer', encoder, first, 'the encoder answered with a body that is not JSON');
  }
  if (!isObject(parsed)) throw fail('invalid_encoder_answer', encoder, first, 'the encoder answered with JSON that is not an object');
  const params = parsed['ec_transfer_params'];
  // An encoder that reports nothing (an older vLLM, a connector without metadata): the items stay raw.
  if (params === undefined || params === null) return sent.map(() => undefined);
  if (!isObject(params)) throw fail('invalid_encoder_answer', encoder, first, "the encoder's ec_transfer_params is not an object");
  const entries = entriesOf(params, encoder, first);
  if (entries.length === 0) return sent.map(() => undefined);
  const byPosition = new Map<number, [string, Entry]>();
  for (const [hash, entry] of entries) {
    const indices = entry['item_indices'];
    if (indices === undefined) continue;
    if (!Array.isArray(indices)) {
      throw fail('invalid_encoder_answer', encoder, first, `the encoder's item_indices of '${hash}' is not a list`);
    }
    for (const at of indices) {
      if (typeof at !== 'number' || !Number.isInteger(at) || at < 0 || at >= sent.length) {
        throw fail(
          'invalid_encoder_answer',
          encoder,
          first,
          `the encoder reported item index ${JSON.stringify(at)} ` + `for a request of ${sent.length} item(s)`,
        );
      }
      const item = sent[at].index;
      if (byPosition.has(at)) throw fail('item_mismatch', encoder, item, `the encoder reported position ${at} twice`);
      byPosition.set(at, [hash, entry]);
    }
  }
  const byHash = new Map(entries);
  return sent.map((item, position) => {
    let match = byPosition.get(position);
    if (match === undefined) {
      const keyed = byHash.get(item.uuid);
      if (keyed !== undefined) match = [item.uuid, keyed];
    }
    if (match === undefined && item.transferId !== undefined) match = entries.find(([, e]) => e['transfer_id'] === item.transferId);
    if (match === undefined && sent.length === 1 && entries.length === 1) match = entries[0];
    if (match === undefined) {
      if (item.videoWithAudio && sent.length === 1) return undefined;
      throw fail('item_mismatch', encoder, item.index, `no entry of the encoder's answer matches the item (uuid ${item.uuid})`);
    }
    const [ecHash, entry] = match;
    return { ecHash, entry, metadata: flatMetadata(entry, encoder, item.index) };
  });
}
