import { xxh64 } from '@node-rs/xxhash';

/** Where a media item's content comes from, as the gateway sees it in the request part. */
interface MediaSource {
  /** Caller-supplied stable id of the content (vLLM's multimodal `uuid`); wins over everything else. */
  readonly uuid?: string | null;
  /** `image_url.url` / `audio_url.url` / `video_url.url`: an http(s) URL or a `data:` URL. */
  readonly url?: string | null;
  /** Inline data (e.g. `input_audio.data`, base64 or raw bytes). */
  readonly data?: string | Uint8Array | null;
}

const hex = (h: bigint): string => h.toString(16).padStart(16, '0');

/**
 * The content key of a media item (`MediaItem.key`), used for encoder-cache affinity: `id:<uuid>` when the part
 * carries a uuid, else `d:<xxh64>` of a data URL's payload or of inline data (so the same bytes give the same key
 * whatever the MIME prefix), else `u:<xxh64>` of the URL. Throws when the source has none of them.
 */
export function mediaContentKey(source: MediaSource): string {
  if (source.uuid) return `id:${source.uuid}`;
  const url = source.url ?? undefined;
  if (url !== undefined && url !== '') {
    if (url.startsWith('data:')) {
      const comma = url.indexOf(',');
      return `d:${hex(xxh64(comma >= 0 ? url.slice(comma + 1) : url))}`;
    }
    return `u:${hex(xxh64(url))}`;
  }
  const data = source.data ?? undefined;
  if (data !== undefined && data.length > 0) return `d:${hex(xxh64(data))}`;
  throw new RangeError('media item has no uuid, url or data to key it by');
}
