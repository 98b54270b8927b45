import { SchedulingLimits, type MediaItem, type SchedulingRequest } from '@triad/bus';
import type { MediaPart, RoutedRequest } from '@triad/request';
import { mediaContentKey, prefixBlockHashes, type PrefixHashOptions } from '@triad/scheduling';

/** Kthena's input-token estimate: a quarter of the prompt's characters, rounded up. */
export function estimateTokens(prompt: string): number {
  return Math.ceil(prompt.length / 4);
}

function mediaItem(part: MediaPart): MediaItem {
  let key: string;
  try {
    key = mediaContentKey(part.part['type'] === 'input_audio' ? {
      uuid: part.uuid ?? null, data: part.source,
    } : { uuid: part.uuid ?? null, url: part.source });
  } catch {
    // A part with nothing to key it by still needs an encoder; the engine will judge the part itself.
    key = `none:${part.index}`;
  }
  const item: MediaItem = { index: part.index, key, modality: part.modality };
  if (part.source.startsWith('data:') || part.part['type'] === 'input_audio') item.bytes = part.source.length;
  return item;
}

/**
 * What the gateway asks the scheduler for one routed request (never the body: prefix hashes of the prompt as
 * the engines get it, media keys and, for precise-prefix-cache, the engines' own KV block hashes).
 */
export function buildSchedulingRequest(
  ctx: RoutedRequest, media: readonly MediaPart[], hashOptions: PrefixHashOptions, kvBlockHashes?: string[],
): SchedulingRequest {
  const routing = ctx.routing;
  const hashes = prefixBlockHashes(routing.upstreamModel, ctx.prompt, hashOptions);
  const request: SchedulingRequest = {
    id: ctx.id,
    namespace: routing.namespace,
    modelServer: routing.serverName,
    model: routing.upstreamModel,
    prefixHashes: hashes.length > SchedulingLimits.maxPrefixHashes ? hashes.slice(0, SchedulingLimits.maxPrefixHashes) : hashes,
    mediaItems: [],
    inputTokens: ctx.inputTokens,
  };
  if (kvBlockHashes !== undefined && kvBlockHashes.length > 0) {
    request.kvBlockHashes = kvBlockHashes.length > SchedulingLimits.maxPrefixHashes ? kvBlockHashes.slice(0, SchedulingLimits.maxPrefixHashes) : kvBlockHashes;
  }
  const n = Math.min(media.length, SchedulingLimits.maxMediaItems);
  for (let i = 0; i < n; i++) request.mediaItems.push(mediaItem(media[i]));
  return request;
}
