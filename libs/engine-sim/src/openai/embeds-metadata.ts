import { EngineHttpError } from '../http/engine-error';
import type { Modality } from './media';

/**
 * The simulated model's placeholder metadata (what vLLM's data parser declares as `placeholder_metadata_fields`):
 * a Qwen2.5-VL-like model sizes an image or video by its `*_grid_thw` (temporal, height, width patches, merged
 * 2×2 into one token) and an audio clip by its `audio_feature_lengths`. An encoder reports these per item; a
 * consumer given a metadata-only `*_embeds` part sizes the item's placeholder range from them.
 */
export const PLACEHOLDER_FIELD: Readonly<Record<Modality, string>> = {
  IMAGE: 'image_grid_thw',
  VIDEO: 'video_grid_thw',
  AUDIO: 'audio_feature_lengths',
};

/** Patches merged into one token (spatial merge 2×2). */
const MERGE = 4;

/** What the encoder reports for an item it encoded from media: sizes equal to MEDIA_TOKENS (256, 1024, 128). */
const MEDIA_METADATA: Readonly<Record<Modality, readonly number[]>> = {
  IMAGE: [1, 32, 32],
  VIDEO: [4, 32, 32],
  AUDIO: [128],
};

function isObject(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

/** A list of numbers, one level of nesting allowed (`[1,h,w]` or `[[1,h,w]]`); undefined otherwise. */
function flatNumbers(v: unknown): number[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const flat = v.flat(1);
  return flat.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 0) ? (flat as number[]) : undefined;
}

function tokensOf(modality: Modality, values: readonly number[]): number | undefined {
  if (modality === 'AUDIO') return values.length > 0 ? values.reduce((a, b) => a + b, 0) : undefined;
  if (values.length === 0 || values.length % 3 !== 0) return undefined;
  let tokens = 0;
  for (let i = 0; i < values.length; i += 3) {
    const [t, h, w] = values.slice(i, i + 3) as [number, number, number];
    tokens += Math.ceil((t * h * w) / MERGE);
  }
  return tokens;
}

/**
 * Placeholder tokens an `*_embeds` part declares through its metadata field; undefined when it declares none (a
 * tensor as base64, or a dict without the field). A malformed field is the engine's 400.
 */
export function embedsPlaceholderTokens(partType: string, modality: Modality, value: unknown): number | undefined {
  if (!isObject(value)) return undefined;
  const field = PLACEHOLDER_FIELD[modality];
  if (!(field in value)) return undefined;
  const values = flatNumbers(value[field]);
  const tokens = values === undefined ? undefined : tokensOf(modality, values);
  if (tokens === undefined) {
    const shape = modality === 'AUDIO' ? 'a list of non-negative integers' : 'a list of [t, h, w] non-negative integers';
    throw new EngineHttpError(400, `${partType}.${field}: Input should be ${shape}`, 'BadRequestError', partType);
  }
  return tokens;
}

/**
 * Whether an `*_embeds` value is only a reference (the metadata field and nothing else): the engine then has no
 * input to encode the item itself and depends on the EC connector for its embedding.
 */
export function isMetadataReference(modality: Modality, value: unknown): boolean {
  if (!isObject(value)) return false;
  const keys = Object.keys(value);
  return keys.length > 0 && keys.every((k) => k === PLACEHOLDER_FIELD[modality]);
}

/**
 * The metadata an encoder reports for one item, as vLLM's `tensor.tolist()` prints it: a grid per item
 * (`{"image_grid_thw": [[1, 32, 32]]}`) or the audio lengths (`{"audio_feature_lengths": [128]}`). An item that
 * arrived as a metadata reference is reported with its own values.
 */
export function reportedMetadata(modality: Modality, embeds?: unknown): Record<string, unknown> {
  const field = PLACEHOLDER_FIELD[modality];
  const given = isObject(embeds) ? flatNumbers(embeds[field]) : undefined;
  const values = given ?? MEDIA_METADATA[modality];
  if (modality === 'AUDIO') return { [field]: [...values] };
  const rows: number[][] = [];
  for (let i = 0; i < values.length; i += 3) rows.push(values.slice(i, i + 3));
  return { [field]: rows };
}
