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
const PART_FIELDS: Readonly<Record<string, readonly [field: string, modality: Modality, key: string]>> = {
  image_url: ['image_url', 'image', 'url'],
  audio_url: ['audio_url', 'audio', 'url'],
  input_audio: ['input_audio', 'audio', 'data'],
  video_url: ['video_url', 'video', 'url'],
};

const NONE: readonly MediaPart[] = [];

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
      const spec = PART_FIELDS[(part as { type?: unknown }).type as string];
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

