import { SchedulingLimits, type MediaItem, type SchedulingRequest } from '@triad/bus';
import type { MediaPart } from '@triad/connectors';
import { mediaContentKey, prefixBlockHashes, type PrefixHashOptions } from '@triad/scheduling';

/** Text of one message content: the string, or its text parts joined by newlines (media parts are skipped). */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const part of content) {
    const p = part as { type?: unknown; text?: unknown } | null;
    if (p !== null && typeof p === 'object' && typeof p.text === 'string' && (p.type === 'text' || p.type === 'input_text' || p.type === 'output_text')) {
      out = out === '' ? p.text : `${out}\n${p.text}`;
    }
  }
  return out;
}

/**
 * The prompt string used for prefix-cache hashing and token estimates, as Kthena builds it: a completion's
 * `prompt` string, or chat messages rendered ChatML-style from their text parts.
 */
export function promptText(body: Record<string, unknown>): string {
  const prompt = body['prompt'];
  if (typeof prompt === 'string') return prompt;
  const messages = body['messages'];
  if (!Array.isArray(messages)) return '';
  let out = '';
  for (const m of messages) {
    const msg = m as { role?: unknown; content?: unknown } | null;
    if (msg === null || typeof msg !== 'object') continue;
    const text = contentText(msg.content);
    if (text === '') continue;
    out += `<|im_start|>${typeof msg.role === 'string' ? msg.role : 'user'}\n${text}<|im_end|>\n`;
  }
  return out;
}

/** Kthena's input-token estimate: a quarter of the prompt's characters, rounded up. */
export function estimateTokens(prompt: string): number {
  return Math.ceil(prompt.length / 4);
}

function mediaItem(part: MediaPart): MediaItem {
  let key: string;
  try {
    key = mediaContentKey(part.part['type'] === 'input_audio' ? { uuid: part.uuid ?? null, data: part.source } : { uuid: part.uuid ?? null, url: part.source });
  } catch {
    // A part with nothing to key it by still needs an encoder; the engine will judge the part itself.
    key = `none:${part.index}`;
  }
  const item: MediaItem = { index: part.index, key, modality: part.modality };
  if (part.source.startsWith('data:') || part.part['type'] === 'input_audio') item.bytes = part.source.length;
  return item;
}

/** What the gateway asks the scheduler for one request (never the body: prefix hashes and media keys only). */
export function buildSchedulingRequest(
  id: string,
  namespace: string,
  modelServer: string,
  model: string,
  prompt: string,
  inputTokens: number,
  media: readonly MediaPart[],
  hashOptions: PrefixHashOptions,
  kvBlockHashes?: string[],
): SchedulingRequest {
  const hashes = prefixBlockHashes(model, prompt, hashOptions);
  const request: SchedulingRequest = {
    id,
    namespace,
    modelServer,
    model,
    prefixHashes: hashes.length > SchedulingLimits.maxPrefixHashes ? hashes.slice(0, SchedulingLimits.maxPrefixHashes) : hashes,
    mediaItems: [],
    inputTokens,
  };
  if (kvBlockHashes !== undefined && kvBlockHashes.length > 0) {
    request.kvBlockHashes = kvBlockHashes.length > SchedulingLimits.maxPrefixHashes ? kvBlockHashes.slice(0, SchedulingLimits.maxPrefixHashes) : kvBlockHashes;
  }
  const n = Math.min(media.length, SchedulingLimits.maxMediaItems);
  for (let i = 0; i < n; i++) request.mediaItems.push(mediaItem(media[i] as MediaPart));
  return request;
}
