import type { MediaPart, Modality } from '@triad/request';
import type { EncodedItem } from './encoder-answer';

/** One media item after its encode: what the consumer bodies say about it. */
export interface HandedOffItem {
  readonly part: MediaPart;
  /** The uuid the encoder saw (the consumer must key the item the same way). */
  readonly uuid: string;
  /** Push connectors: the transfer id the encoder pushed the item under. */
  readonly transferId: string | undefined;
  /** What the encoder reported; undefined when it reported nothing for the item. */
  readonly encoded: EncodedItem | undefined;
}

const EMBEDS_TYPE: Readonly<Record<Modality, string>> = { image: 'image_embeds', audio: 'audio_embeds', video: 'video_embeds' };

type Part = Record<string, unknown>;

/** The part a consumer gets for one item: a metadata reference when rewriting, else the client's part with the uuid. */
function consumerPart(item: HandedOffItem, rewrite: boolean): Part {
  const metadata = item.encoded?.metadata;
  if (rewrite && metadata !== undefined) {
    const type = EMBEDS_TYPE[item.part.modality];
    return { type, [type]: metadata, uuid: item.uuid };
  }
  return item.part.part['uuid'] === item.uuid ? item.part.part : { ...item.part.part, uuid: item.uuid };
}

/**
 * Whether the items become `*_embeds` references (vLLM `--enable-mm-embeds` on P/PD/D). vLLM's audio rule: when the
 * request has audio and any item came back without metadata, every item stays raw (with its uuid), because the
 * consumer processes audio and the other items of one request together.
 */
function rewrites(items: readonly HandedOffItem[], mmEmbeds: boolean): boolean {
  if (!mmEmbeds) return false;
  const audio = items.some((i) => i.part.modality === 'audio');
  return !audio || items.every((i) => i.encoded?.metadata !== undefined);
}

/**
 * The body the EC consumer (P, or PD in E→PD) and the decode get after the encode (vLLM's EPD proxy, §rewrite): the
 * client's body with each media part replaced by its metadata reference (`mmEmbeds`) or kept raw with the uuid the
 * encoder saw, and `ec_transfer_params` holding `ec_items` (push connectors: one `{mm_hash, transfer_id}` per item,
 * in order) and each encoder entry verbatim under its hash (NIXL's handles live there). Everything else passes
 * unchanged. `body` is not mutated.
 */
export function consumerBody(
  body: Record<string, unknown>,
  items: readonly HandedOffItem[],
  mmEmbeds: boolean,
  push: boolean,
): Record<string, unknown> {
  const rewrite = rewrites(items, mmEmbeds);
  const byPart = new Map<object, HandedOffItem>();
  for (const item of items) byPart.set(item.part.part, item);
  const messages = body['messages'] as unknown[];
  const out: Record<string, unknown> = { ...body };
  out['messages'] = messages.map((message) => {
    const content = (message as { content?: unknown } | null)?.content;
    if (!Array.isArray(content) || !content.some((p) => byPart.has(p as object))) return message;
    return {
      ...(message as Part),
      content: content.map((p) => {
        const item = byPart.get(p as object);
        return item === undefined ? p : consumerPart(item, rewrite);
      }),
    };
  });
  // The gateway refuses a client's own `ec_transfer_params` on epd servers (apps/gateway/src/planning/handoff-params.ts).
  const params: Record<string, unknown> = {};
  if (push) {
    params['ec_items'] = items.map((i) =>
      i.encoded !== undefined ? { mm_hash: i.encoded.ecHash, transfer_id: i.transferId } : { transfer_id: i.transferId },
    );
  }
  for (const item of items) if (item.encoded !== undefined) params[item.encoded.ecHash] = item.encoded.entry;
  if (Object.keys(params).length > 0) out['ec_transfer_params'] = params;
  return out;
}
