import { SchedulingLimits, type MediaItem, type SchedulingRequest } from '@triad/bus';
import { promptText, type MediaPart, type RoutedRequest } from '@triad/request';
import { mediaContentKey, prefixBlockHashes, type PrefixHashOptions } from '@triad/scheduling';

/** Kthena's input-token estimate: a quarter of the prompt's characters, rounded up. */
export function estimateTokens(prompt: string): number {
  return Math.ceil(prompt.length / 4);
}

function mediaItem(part: MediaPart): MediaItem {
  let key: string;
  try {
    key = mediaContentKey(
      part.part['type'] === 'input_audio'
        ? {
            uuid: part.uuid ?? null,
            data: part.source,
          }
        : { uuid: part.uuid ?? null, url: part.source },
    );
  } catch {
    // A part with nothing to key it by still needs an encoder; the engine will judge the part itself.
    key = `none:${part.index}`;
  }
  const item: MediaItem = { index: part.index, key, modality: part.modality };
  if (part.source.startsWith('data:') || part.part['type'] === 'input_audio') item.bytes = part.source.length;
  return item;
}

/**
 * The text prefix hashes are taken over: the prompt, or for a request with media the prompt with each media part's
 * content key at its place. An engine's prefix cache holds the image's tokens in the sequence, so the same text
 * around a different image is a different prefix (and the text before the image still matches).
 */
function hashedPrompt(ctx: RoutedRequest, media: readonly MediaPart[], items: readonly MediaItem[]): string {
  if (items.length === 0) return ctx.prompt;
  const keyOf = new Map<object, string>();
  for (let i = 0; i < items.length; i++) keyOf.set(media[i].part, items[i].key);
  return promptText(ctx.body, { mediaMarker: markerOf(keyOf) });
}

/** The media marker of each part with a content key (returned, so the function is not named per request under `keepNames`). */
function markerOf(keyOf: ReadonlyMap<object, string>): (part: object) => string | undefined {
  return (part) => {
    const key = keyOf.get(part);
    return key === undefined ? undefined : `<|media:${key}|>`;
  };
}

/** Longest session key sent to the scheduler (longer ones are cut: they only need to be stable). */
const MAX_SESSION_KEY = 256;

/**
 * The request's session for session affinity: the `x-session-id` header, else the body's `session_id`, else the
 * OpenAI `user` field. Undefined when none is a non-empty string.
 */
export function sessionKey(ctx: RoutedRequest): string | undefined {
  const header = ctx.headers['x-session-id'];
  const candidates = [Array.isArray(header) ? header[0] : header, ctx.body['session_id'], ctx.body['user']];
  for (const c of candidates) if (typeof c === 'string' && c !== '') return c.slice(0, MAX_SESSION_KEY);
  return undefined;
}

/**
 * What the gateway asks the scheduler for one routed request (never the body: prefix hashes of the prompt as
 * the engines get it, media keys and, for precise-prefix-cache, the engines' own KV block hashes).
 */
export function buildSchedulingRequest(
  ctx: RoutedRequest,
  media: readonly MediaPart[],
  hashOptions: PrefixHashOptions,
  kvBlockHashes?: string[],
): SchedulingRequest {
  const routing = ctx.routing;
  const items: MediaItem[] = [];
  const n = Math.min(media.length, SchedulingLimits.maxMediaItems);
  for (let i = 0; i < n; i++) items.push(mediaItem(media[i]));
  const hashes = prefixBlockHashes(routing.upstreamModel, hashedPrompt(ctx, media, items), hashOptions);
  const request: SchedulingRequest = {
    id: ctx.id,
    namespace: routing.namespace,
    modelServer: routing.serverName,
    model: routing.upstreamModel,
    prefixHashes: hashes.length > SchedulingLimits.maxPrefixHashes ? hashes.slice(0, SchedulingLimits.maxPrefixHashes) : hashes,
    mediaItems: items,
    inputTokens: ctx.inputTokens,
  };
  const session = sessionKey(ctx);
  if (session !== undefined) request.session = session;
  if (kvBlockHashes !== undefined && kvBlockHashes.length > 0) {
    request.kvBlockHashes =
      kvBlockHashes.length > SchedulingLimits.maxPrefixHashes ? kvBlockHashes.slice(0, SchedulingLimits.maxPrefixHashes) : kvBlockHashes;
  }
  return request;
}
