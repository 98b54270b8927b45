import { AttributeMemo } from './attribute-memo';
import { ProtoBuffer } from './proto-buffer';

/** A span or event name: its length-prefixed UTF-8, and the memo of the attribute lists of spans of that name. */
export interface EncodedName {
  readonly encoded: Uint8Array;
  readonly attributes: AttributeMemo;
}

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
  readonly #names = new Map<string, EncodedName>();
  readonly #scratch = new ProtoBuffer(256);

  constructor(
    readonly maxEntries = 4096,
    readonly maxLength = 256,
  ) {}

  get size(): number {
    return this.#entries.size + this.#keys.size + this.#names.size;
  }

  /**
   * Writes the head of a KeyValue (field 1: `key`, then the tag of field 2, whose length-prefixed AnyValue the
   * caller writes): the same bytes as `tag(1, LEN)`, `write(key)`, `tag(2, LEN)`, copied from one cached chunk.
   */
  writeKey(out: ProtoBuffer, key: string): void {
    out.raw(this.keyHead(key));
  }

  /** The bytes `writeKey` writes, cached unless the key is too long to keep (then encoded anew for this call). */
  keyHead(key: string): Uint8Array {
    const cached = this.#keys.get(key);
    if (cached !== undefined) return cached;
    const scratch = this.#scratch;
    scratch.reset();
    keyValueHead(scratch, key);
    const encoded = scratch.take();
    if (key.length <= this.maxLength) this.#keep(this.#keys, key, encoded);
    return encoded;
  }

  /**
   * A span or event name's encoding and attribute memo, made on first use; undefined for a name too long to keep
   * (a caller writes it with `write` and its attributes without a memo).
   */
  named(name: string): EncodedName | undefined {
    const cached = this.#names.get(name);
    if (cached !== undefined || name.length > this.maxLength) return cached;
    const scratch = this.#scratch;
    scratch.reset();
    scratch.string(name);
    const entry: EncodedName = { encoded: scratch.take(), attributes: new AttributeMemo() };
    this.#keep(this.#names, name, entry);
    return entry;
  }

  /** Writes `value` as a length-prefixed string into `out`. */
  write(out: ProtoBuffer, value: string): void {
    const cached = this.#entries.get(value);
    if (cached !== undefined) {
      out.raw(cached);
      return;
    }
    if (value.length > this.maxLength) {
      out.string(value);
      return;
    }
    const scratch = this.#scratch;
    scratch.reset();
    scratch.string(value);
    const encoded = scratch.take();
    this.#keep(this.#entries, value, encoded);
    out.raw(encoded);
  }

  #keep<T>(cache: Map<string, T>, text: string, value: T): void {
    if (cache.size >= this.maxEntries) cache.clear();
    cache.set(text, value);
  }
}

/** A KeyValue's `key` field and the tag of its `value` field (both length-delimited: wire type 2). */
function keyValueHead(into: ProtoBuffer, key: string): void {
  into.tag(1, 2);
  into.string(key);
  into.tag(2, 2);
}
