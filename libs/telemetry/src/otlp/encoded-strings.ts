import { ProtoBuffer } from './proto-buffer';

/**
 * Length-prefixed UTF-8 encodings of the strings every span repeats (attribute keys, span and event names, status
 * messages, resource and scope strings), so each is encoded once instead of once per span. Bounded: past
 * `maxEntries` the cache starts over, which costs one re-encoding of each live string and nothing else, and no
 * string longer than `maxLength` is kept (those are values, not names).
 */
export class EncodedStrings {
  readonly #entries = new Map<string, Uint8Array>();
  /** KeyValue heads: `key` field tag, the key's length-prefixed bytes, `value` field tag. */
  readonly #keys = new Map<string, Uint8Array>();
  readonly #scratch = new ProtoBuffer(256);

  constructor(
    readonly maxEntries = 4096,
    readonly maxLength = 256,
  ) {}

  get size(): number {
    return this.#entries.size + this.#keys.size;
  }

  /**
   * Writes the head of a KeyValue (field 1: `key`, then the tag of field 2, whose length-prefixed AnyValue the
   * caller writes): the same bytes as `tag(1, LEN)`, `write(key)`, `tag(2, LEN)`, copied from one cached chunk.
   */
  writeKey(out: ProtoBuffer, key: string): void {
    this.#write(out, this.#keys, key, keyValueHead);
  }

  /** Writes `value` as a length-prefixed string into `out`. */
  write(out: ProtoBuffer, value: string): void {
    this.#write(out, this.#entries, value, lengthPrefixed);
  }

  /** Copies `text`'s cached encoding into `out`, encoding and caching it first (unless it is too long to keep). */
  #write(out: ProtoBuffer, cache: Map<string, Uint8Array>, text: string, encode: (into: ProtoBuffer, text: string) => void): void {
    const cached = cache.get(text);
    if (cached !== undefined) {
      out.raw(cached);
      return;
    }
    if (text.length > this.maxLength) {
      encode(out, text);
      return;
    }
    const scratch = this.#scratch;
    scratch.reset();
    encode(scratch, text);
    const encoded = scratch.take();
    if (cache.size >= this.maxEntries) cache.clear();
    cache.set(text, encoded);
    out.raw(encoded);
  }
}

function lengthPrefixed(into: ProtoBuffer, text: string): void {
  into.string(text);
}

/** A KeyValue's `key` field and the tag of its `value` field (both length-delimited: wire type 2). */
function keyValueHead(into: ProtoBuffer, key: string): void {
  into.tag(1, 2);
  into.string(key);
  into.tag(2, 2);
}
