import { ProtoBuffer } from './proto-buffer';

/**
 * Length-prefixed UTF-8 encodings of the strings every span repeats (attribute keys, span and event names, status
 * messages, resource and scope strings), so each is encoded once instead of once per span. Bounded: past
 * `maxEntries` the cache starts over, which costs one re-encoding of each live string and nothing else, and no
 * string longer than `maxLength` is kept (those are values, not names).
 */
export class EncodedStrings {
  readonly #entries = new Map<string, Uint8Array>();
  readonly #scratch = new ProtoBuffer(256);

  constructor(
    readonly maxEntries = 4096,
    readonly maxLength = 256,
  ) {}

  get size(): number {
    return this.#entries.size;
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
    if (this.#entries.size >= this.maxEntries) this.#entries.clear();
    this.#entries.set(value, encoded);
    out.raw(encoded);
  }
}
