import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { VllmMmItem } from '../hashing/vllm-block-hash';
import { UnsupportedChatError, type ChatMediaPart } from './chat-messages';
import { dataUrlBytes, imageSize } from './image-size';

/** How a model's processor turns one image into placeholder tokens. */
export interface ImagePlaceholderRule {
  /** The token the chat template emits once per image and the processor repeats. */
  readonly padToken: string;
  /** Placeholder tokens for an image of this size. */
  tokensFor(width: number, height: number): number;
}

/** Python's round(): halves go to the even neighbour (transformers' smart_resize runs in Python). */
export function pyRound(x: number): number {
  const f = Math.floor(x);
  const diff = x - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * Qwen2-VL / Qwen2.5-VL (transformers Qwen2VLImageProcessor `smart_resize`, vLLM's Qwen2-VL prompt update): the
 * image is resized to multiples of patch·merge pixels within [min_pixels, max_pixels] keeping its aspect ratio,
 * cut into patch×patch pieces, and every merge×merge group becomes one `<|image_pad|>` token.
 */
export function qwen2VlRule(cfg: Record<string, unknown>): ImagePlaceholderRule {
  const num = (k: string, d: number): number => (typeof cfg[k] === 'number' ? cfg[k] : d);
  const size = (cfg['size'] ?? {}) as Record<string, unknown>;
  const patch = num('patch_size', 14);
  const merge = num('merge_size', 2);
  const minPixels = num('min_pixels', typeof size['shortest_edge'] === 'number' ? size['shortest_edge'] : 56 * 56);
  const maxPixels = num('max_pixels', typeof size['longest_edge'] === 'number' ? size['longest_edge'] : 28 * 28 * 1280);
  const factor = patch * merge;
  return {
    padToken: '<|image_pad|>',
    tokensFor(width, height) {
      if (Math.max(width, height) / Math.min(width, height) > 200) throw new UnsupportedChatError('image aspect ratio above 200');
      let h = pyRound(height / factor) * factor;
      let w = pyRound(width / factor) * factor;
      if (h * w > maxPixels) {
        const beta = Math.sqrt((height * width) / maxPixels);
        h = Math.max(factor, Math.floor(height / beta / factor) * factor);
        w = Math.max(factor, Math.floor(width / beta / factor) * factor);
      } else if (h * w < minPixels) {
        const beta = Math.sqrt(minPixels / (height * width));
        h = Math.ceil((height * beta) / factor) * factor;
        w = Math.ceil((width * beta) / factor) * factor;
      }
      return ((h / patch) * (w / patch)) / (merge * merge);
    },
  };
}

/** The model's image rule from `preprocessor_config.json` beside its tokenizer, when Triad knows its processor. */
export function imageRuleOf(dir: string): ImagePlaceholderRule | undefined {
  const file = join(dir, 'preprocessor_config.json');
  if (!existsSync(file)) return undefined;
  const cfg = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  const type = cfg['image_processor_type'];
  if (type === 'Qwen2VLImageProcessor' || type === 'Qwen2VLImageProcessorFast') return qwen2VlRule(cfg);
  return undefined;
}

/**
 * Expands each image's single pad token into the processor's count and returns the items as vLLM hashes them:
 * identifier = the client's `uuid` (vLLM uses a given uuid as the item's hash when no processor kwargs are set;
 * without one the hash is a BLAKE3 of the decoded pixels, which only the engine computes: `imageHash`, given by an
 * engine), offset and length of its placeholder run. Images must be `data:` URLs (the gateway reads their size,
 * never downloads).
 */
export function expandImages(
  ids: readonly number[],
  media: readonly ChatMediaPart[],
  rule: ImagePlaceholderRule,
  padId: number,
  imageHash?: (part: ChatMediaPart) => string,
): { ids: number[]; mm: VllmMmItem[] } {
  const out: number[] = [];
  const mm: VllmMmItem[] = [];
  let next = 0;
  for (const id of ids) {
    if (id !== padId || next >= media.length) {
      out.push(id);
      continue;
    }
    const part = media[next++];
    const identifier = part.uuid ?? imageHash?.(part);
    if (identifier === undefined) throw new UnsupportedChatError('an image without a uuid is hashed from its pixels by the engine');
    const bytes = dataUrlBytes(part.url);
    const size = bytes && imageSize(bytes);
    if (!size) throw new UnsupportedChatError('image size unknown (not a data: URL of a PNG, JPEG, GIF or WebP)');
    const count = rule.tokensFor(size.width, size.height);
    mm.push({ identifier, offset: out.length, length: count });
    for (let i = 0; i < count; i++) out.push(padId);
  }
  if (next !== media.length) throw new UnsupportedChatError('the template placed fewer image tokens than the request has images');
  return { ids: out, mm };
}
