/** Kinds of media a chat message part can carry. */
export type Modality = 'image' | 'audio' | 'video';

/** One media part of a chat request, in message order, as the EPD encoder fan-out and the scheduler need it. */
export interface MediaPart {
  /** Position among the request's media parts (0-based). */
  readonly index: number;
  /** The content part exactly as the client sent it (sent alone to its encoder). */
  readonly part: Record<string, unknown>;
  readonly modality: Modality;
  /** The URL or inline data the part points at (what content keys hash). */
  readonly source: string;
  /** Client-supplied cache key (`uuid` on the part, vLLM multi_modal_uuids), when present. */
  readonly uuid: string | undefined;
}

// Part types whose payload the encoders compute. video_url is included on purpose (vLLM's reference proxy
// leaves video to P/PD; the issue asks for every media modality to be encoded remotely).
// A Map, not an object literal: a part typed "constructor" or "__proto__" must not find Object's own members.
const PART_FIELDS: ReadonlyMap<unknown, readonly [field: string, modality: Modality, key: string]> = new Map([
  ['image_url', ['image_url', 'image', 'url']],
  ['audio_url', ['audio_url', 'audio', 'url']],
  ['input_audio', ['input_audio', 'audio', 'data']],
  ['video_url', ['video_url', 'video', 'url']],
] as const);

const NONE: readonly MediaPart[] = [];

/** Content parts of a chat request across all messages, and how many of them are media (for the request limits). */
export function countContentParts(body: Readonly<Record<string, unknown>>): { parts: number; media: number } {
  const messages = body['messages'];
  let parts = 0;
  let media = 0;
  if (!Array.isArray(messages)) return { parts, media };
  for (const message of messages) {
    const content = (message as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) continue;
    parts += content.length;
    for (const part of content) {
      if (part !== null && typeof part === 'object' && PART_FIELDS.has((part as { type?: unknown }).type)) media++;
    }
  }
  return { parts, media };
}

/**
 * Collects the media parts of a chat request in order across all messages (string contents carry none).
 * Returns a shared empty array for text-only requests, so the common case allocates nothing.
 */
export function extractMediaParts(body: Record<string, unknown>): readonly MediaPart[] {
  const messages = body['messages'];
  if (!Array.isArray(messages)) return NONE;
  let out: MediaPart[] | undefined;
  for (const message of messages) {
    const content = (message as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) continue;
    for (const part of content) {
      if (part === null || typeof part !== 'object') continue;
      const spec = PART_FIELDS.get((part as { type?: unknown }).type);
      if (spec === undefined) continue;
      const payload = (part as Record<string, unknown>)[spec[0]];
      const raw = payload !== null && typeof payload === 'object' ? (payload as Record<string, unknown>)[spec[2]] : payload;
      const uuid = (part as { uuid?: unknown }).uuid;
      out ??= [];
      out.push({
        index: out.length,
        part: part as Record<string, unknown>,
        modality: spec[1],
        source: typeof raw === 'string' ? raw : '',
        uuid: typeof uuid === 'string' && uuid !== '' ? uuid : undefined,
      });
    }
  }
  return out ?? NONE;
}
