import { createHash } from 'node:crypto';
import { EngineHttpError } from '../http/engine-error';
import { isMetadataReference } from '../openai/embeds-metadata';
import type { InferenceRequest } from '../openai/inference-request';
import { MEDIA_TOKENS, mediaKey, type MediaItem } from '../openai/media';

/** One multimodal item of a request as vLLM's engine sees it (`request.mm_features[i]`). */
export interface MmFeature {
  /** Position among the request's media items (message order). */
  readonly index: number;
  readonly item: MediaItem;
  /** The encoder-cache key (`identifier`): what EC connectors store and look items up by. */
  readonly identifier: string;
  /** Placeholder tokens of the item. */
  readonly tokens: number;
  /** Whether the request carries what a local encode needs (media or a tensor), not only a metadata reference. */
  readonly localInput: boolean;
}

/** The fields of a request vLLM re-hashes an item's key with (the processor's and the media loader's options). */
const PROCESSING_KWARGS = ['mm_processor_kwargs', 'media_io_kwargs'] as const;

function processingKwargs(body: Record<string, unknown>): Record<string, unknown> | undefined {
  let found: Record<string, unknown> | undefined;
  for (const field of PROCESSING_KWARGS) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'object' || Array.isArray(v)) {
      throw new EngineHttpError(400, `${field}: Input should be a valid dictionary`, 'BadRequestError', field);
    }
    // An empty dict is falsy to vLLM: it does not change the key.
    if (Object.keys(v).length > 0) (found ??= {})[field] = v;
  }
  return found;
}

/** JSON with object keys sorted, so equal kwargs hash equally whatever order the client wrote them in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/**
 * vLLM's item identifier: the part's `uuid`, else a hash of its content; when the request sets processing kwargs
 * the uuid or content is hashed again together with them and the model (`_hash_mm_items`), so an encoder and a
 * consumer agree only when both saw the same kwargs.
 */
function identifierOf(item: MediaItem, model: string, kwargs: Record<string, unknown> | undefined): string {
  const base = mediaKey(item);
  if (!kwargs) return base;
  return createHash('sha256')
    .update(canonical({ model, modality: item.modality.toLowerCase(), item: base, ...kwargs }))
    .digest('hex');
}

function isEmbedsPart(item: MediaItem): boolean {
  return item.partType.endsWith('_embeds');
}

/** The request's multimodal features, in order (validates the processing kwargs). */
export function mmFeatures(request: InferenceRequest, model: string): MmFeature[] {
  if (request.media.length === 0) return [];
  const kwargs = processingKwargs(request.body);
  return request.media.map((item, index) => ({
    index,
    item,
    identifier: identifierOf(item, model, kwargs),
    tokens: item.tokens ?? MEDIA_TOKENS[item.modality],
    localInput: !isEmbedsPart(item) || !isMetadataReference(item.modality, item.embeds),
  }));
}

/** vLLM's check on `*_embeds` parts: they need `--enable-mm-embeds`. Returns how many the request holds. */
export function checkEmbedsAllowed(features: readonly MmFeature[], enabled: boolean): number {
  let embeds = 0;
  for (const f of features) {
    if (!isEmbedsPart(f.item)) continue;
    const type = f.item.partType;
    if (!enabled) throw new EngineHttpError(400, `You must set \`--enable-mm-embeds\` to input \`${type}\``, 'BadRequestError', type);
    embeds++;
  }
  return embeds;
}

/** Distinct items of a request with the positions they occupy (vLLM encodes a repeated item once). */
export interface DistinctItem {
  readonly feature: MmFeature;
  readonly indices: readonly number[];
}

export function distinctItems(features: readonly MmFeature[]): DistinctItem[] {
  const byId = new Map<string, { feature: MmFeature; indices: number[] }>();
  for (const f of features) {
    const seen = byId.get(f.identifier);
    if (seen) seen.indices.push(f.index);
    else byId.set(f.identifier, { feature: f, indices: [f.index] });
  }
  return [...byId.values()];
}
