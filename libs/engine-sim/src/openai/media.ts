import { createHash } from 'node:crypto';
import { EngineHttpError } from '../http/engine-error';
import { embedsPlaceholderTokens } from './embeds-metadata';

export type Modality = 'IMAGE' | 'AUDIO' | 'VIDEO';

/** One multimodal content part of a chat request. */
export interface MediaItem {
  /** The OpenAI part type: image_url, audio_url, input_audio, video_url, image_embeds, audio_embeds, video_embeds. */
  readonly partType: string;
  readonly modality: Modality;
  /** URL or data (what the encoder gets and what the cache key is computed from). */
  readonly source: string;
  /** vLLM `multi_modal_uuids`: an explicit cache key sent with the part. */
  readonly uuid?: string;
  /** `*_embeds` parts: the part's value (a tensor as base64, or a metadata reference such as `{image_grid_thw}`). */
  readonly embeds?: unknown;
  /** `*_embeds` parts that declare their placeholder size (`image_grid_thw`, ...): that many prompt tokens. */
  readonly tokens?: number;
  /** Per-media options sent next to the URL (`{"url": …, "detail": "high"}`); `detail: "auto"` is the default, left out. */
  readonly options?: Readonly<Record<string, unknown>>;
}

/** Simulated prompt tokens per media item (a 336px image in a LLaVA-like model is in this range). */
export const MEDIA_TOKENS: Readonly<Record<Modality, number>> = { IMAGE: 256, AUDIO: 128, VIDEO: 1024 };

const URL_PARTS: Readonly<Record<string, Modality>> = { image_url: 'IMAGE', audio_url: 'AUDIO', video_url: 'VIDEO' };
const EMBEDS_PARTS: Readonly<Record<string, Modality>> = { image_embeds: 'IMAGE', audio_embeds: 'AUDIO', video_embeds: 'VIDEO' };

function urlOf(part: Record<string, unknown>, field: string): string {
  const v = part[field];
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { url?: unknown }).url === 'string') return (v as { url: string }).url;
  throw new EngineHttpError(400, `${field}.url: Field required`);
}

function optionsOf(value: unknown): Record<string, unknown> | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const entries = Object.entries(value as Record<string, unknown>).filter(
    ([k, v]) => k !== 'url' && v !== null && v !== undefined && !(k === 'detail' && v === 'auto'),
  );
  return entries.length > 0 ? Object.fromEntries(entries) : undefined;
}

/** Reads a media part; returns undefined for text parts and throws 400 for unknown or malformed parts. */
export function mediaItemOf(part: Record<string, unknown>): MediaItem | undefined {
  const type = part['type'];
  const uuid = typeof part['uuid'] === 'string' ? part['uuid'] : undefined;
  if (type === 'text') {
    if (typeof part['text'] !== 'string') throw new EngineHttpError(400, 'text: Input should be a valid string');
    return undefined;
  }
  if (typeof type === 'string' && URL_PARTS[type]) {
    const options = optionsOf(part[type]);
    const source = urlOf(part, type);
    return { partType: type, modality: URL_PARTS[type], source, ...(uuid ? { uuid } : {}), ...(options ? { options } : {}) };
  }
  if (type === 'input_audio') {
    const audio = part['input_audio'] as { data?: unknown } | undefined;
    if (!audio || typeof audio.data !== 'string') throw new EngineHttpError(400, 'input_audio.data: Field required');
    return { partType: type, modality: 'AUDIO', source: audio.data, ...(uuid ? { uuid } : {}) };
  }
  if (typeof type === 'string' && EMBEDS_PARTS[type]) {
    const modality = EMBEDS_PARTS[type];
    const value = part[type];
    const tokens = embedsPlaceholderTokens(type, modality, value);
    const source = JSON.stringify(value ?? null);
    return { partType: type, modality, source, embeds: value, ...(uuid ? { uuid } : {}), ...(tokens !== undefined ? { tokens } : {}) };
  }
  throw new EngineHttpError(400, `Unknown part type: ${String(type)}`);
}

/**
 * The encoder-cache key of an item: its `uuid` when given, else a sha256 of its URL or data. Producer and consumer
 * compute it independently from the same media, so the gateway never needs to know it (vLLM mm_hash semantics).
 */
export function mediaKey(item: MediaItem): string {
  return item.uuid ?? createHash('sha256').update(item.source).digest('hex');
}
