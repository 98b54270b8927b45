/**
 * A growable protobuf output buffer: varints, fixed-width numbers, strings and length-delimited messages, written
 * in one pass. A message's length prefix is reserved as one byte and widened (content moved up) when the message
 * turns out longer than 127 bytes, so every length is the minimal varint, as any protobuf encoder writes it.
 * Buffers are Buffers, not zero-filled: nothing is read before it is written. The exporter holds on to a request
 * while it retries, so a request's bytes are handed over with their buffer (`detach()`) or copied (`take()`).
 */
export class ProtoBuffer {
  /**
   * The output. Public for a writer that puts several bytes it knows with one `ensure` (then stores them here from
   * `pos` and moves `pos`): a call per byte costs more than the byte. One kind of array throughout (node's
   * Buffer), so that every access to it sees one map.
   */
  bytes: Buffer;
  #view: DataView;
  pos = 0;

  constructor(readonly initialSize = 64 * 1024) {
    this.bytes = Buffer.allocUnsafe(initialSize);
    this.#view = viewOf(this.bytes);
  }

  reset(): void {
    this.pos = 0;
  }

  /** The bytes written since `reset()`, as a copy the caller owns. */
  take(): Uint8Array {
    // Not slice(): Node 20's TypedArray slice copies element by element, seven times slower than set() here.
    const copy = new Uint8Array(this.pos);
    copy.set(this.bytes.subarray(0, this.pos));
    return copy;
  }

  /**
   * The bytes written since `reset()`, handed over without a copy: the buffer goes with them and writing goes on in
   * a new one, not zero-filled (every byte of it is written before it is read), as large as this request (so a
   * run of small exports after a large one does not allocate the large size each time), at least `initialSize`.
   */
  detach(): Uint8Array {
    const written = this.bytes.subarray(0, this.pos);
    this.bytes = Buffer.allocUnsafe(Math.max(this.initialSize, this.pos));
    this.#view = viewOf(this.bytes);
    this.pos = 0;
    return written;
  }

  ensure(extra: number): void {
    const needed = this.pos + extra;
    if (needed <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < needed) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    grown.set(this.bytes.subarray(0, this.pos));
    this.bytes = grown;
    this.#view = viewOf(grown);
  }

  /** A varint of a value known to be an integer in [0, 2^32): tags, lengths, enum codes. */
  uint32(value: number): void {
    this.ensure(5);
    const bytes = this.bytes;
    let v = value >>> 0;
    if (v < 0x80) {
      // Most tags, lengths and codes: one byte.
      bytes[this.pos++] = v;
      return;
    }
    while (v > 0x7f) {
      bytes[this.pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    bytes[this.pos++] = v;
  }

  /**
   * A varint of any JS number as an int64/uint32 field: values in [0, 2^32) as themselves (a fraction cut off),
   * negative ones as 64-bit two's complement (ten bytes), larger ones from their high and low 32-bit halves.
   */
  varint(value: number): void {
    if (value >= 0 && value <= 0xffffffff) {
      this.uint32(value);
      return;
    }
    const magnitude = Math.abs(value);
    let low = magnitude >>> 0;
    let high = (magnitude / 0x100000000) >>> 0;
    if (value < 0) {
      // Negate in two's complement across the two halves.
      low = ~low >>> 0;
      high = ~high >>> 0;
      low = (low + 1) >>> 0;
      if (low === 0) high = (high + 1) >>> 0;
    }
    this.ensure(10);
    const bytes = this.bytes;
    while (high !== 0 || low > 0x7f) {
      bytes[this.pos++] = (low & 0x7f) | 0x80;
      low = ((low >>> 7) | (high << 25)) >>> 0;
      high >>>= 7;
    }
    bytes[this.pos++] = low;
  }

  /** A field key: field number and wire type. */
  tag(field: number, wireType: number): void {
    this.uint32((field << 3) | wireType);
  }

  fixed32(value: number): void {
    this.ensure(4);
    this.#view.setUint32(this.pos, value >>> 0, true);
    this.pos += 4;
  }

  fixed64(low: number, high: number): void {
    this.ensure(8);
    this.#view.setUint32(this.pos, low >>> 0, true);
    this.#view.setUint32(this.pos + 4, high >>> 0, true);
    this.pos += 8;
  }

  double(value: number): void {
    this.ensure(8);
    this.#view.setFloat64(this.pos, value, true);
    this.pos += 8;
  }

  /** One byte as it is: a tag or a length already known to fit in one varint byte. */
  byte(value: number): void {
    this.ensure(1);
    this.bytes[this.pos++] = value;
  }

  /** The bytes from `start` to the end, as a copy the caller owns (a chunk to replay with `raw`). */
  copyFrom(start: number): Uint8Array {
    const copy = new Uint8Array(this.pos - start);
    typedArraySet.call(copy, this.bytes.subarray(start, this.pos));
    return copy;
  }

  /**
   * `value`'s characters as bytes, no length before them, when every one is ASCII (then its UTF-8 is exactly
   * `value.length` bytes, so a caller could write every length around it first). Returns false, having written
   * nothing, at the first character that is not.
   */
  ascii(value: string): boolean {
    const n = value.length;
    if (n >= NATIVE_ASCII_MIN) {
      // Room for the UTF-8 of any string of n units (three bytes a unit at most): every byte past n means a unit
      // that is not ASCII, and bytes past `pos` are not part of the output.
      this.ensure(3 * n);
      if (this.bytes.write(value, this.pos) !== n) return false;
      this.pos += n;
      return true;
    }
    this.ensure(n);
    const bytes = this.bytes;
    let p = this.pos;
    for (let i = 0; i < n; i++) {
      const c = value.charCodeAt(i);
      if (c > 0x7f) return false;
      bytes[p++] = c;
    }
    this.pos = p;
    return true;
  }

  /** Bytes as they are (already encoded, e.g. a cached length-prefixed string). */
  raw(chunk: Uint8Array): void {
    const n = chunk.length;
    this.ensure(n);
    // One typed-array copy: under callgrind it counts less than half of a byte loop's instructions even for the
    // short cached keys that dominate (a JS loop pays bounds checks and a store per byte). Called through the
    // function read once: `this.bytes.set` looks the method up through the prototype chain by an inline-cache
    // call each time (about 70 instructions, half the copy's own).
    typedArraySet.call(this.bytes, chunk, this.pos);
    this.pos += n;
  }

  /**
   * `length` bytes (a multiple of 4) of `source` from `at`, with their length: an id's bytes where they were drawn.
   * Copied four bytes at a time through DataViews (the recorder makes one per pool of random bytes): a byte loop
   * between two Buffers counted about 55 instructions a byte under callgrind, and `set` of a `subarray` makes a
   * view object first.
   */
  lengthPrefixedFrom(source: DataView, at: number, length: number): void {
    this.ensure(length + 1);
    const view = this.#view;
    let p = this.pos;
    this.bytes[p++] = length;
    for (let i = 0; i < length; i += 4) view.setUint32(p + i, source.getUint32(at + i, true), true);
    this.pos = p + length;
  }

  /** Copies the `into.length` bytes written from `from` into `into`. */
  copyTo(into: Uint8Array, from: number): void {
    typedArraySet.call(into, this.bytes.subarray(from, from + into.length));
  }

  /** A length-delimited bytes field's payload. */
  lengthPrefixed(chunk: Uint8Array): void {
    this.uint32(chunk.length);
    this.raw(chunk);
  }

  /** A string's UTF-8 bytes with their length; lone surrogates become U+FFFD, as in every WHATWG encoder. */
  string(value: string): void {
    const n = value.length;
    // ASCII (nearly every attribute value): copied in the same pass that checks it, behind its length.
    this.uint32(n);
    this.ensure(n);
    const bytes = this.bytes;
    const start = this.pos;
    let p = start;
    for (let i = 0; i < n; i++) {
      const c = value.charCodeAt(i);
      if (c > 0x7f) {
        // Not ASCII: the length prefix written counts UTF-16 units, not bytes; both are written again.
        this.pos = start - varintLength(n);
        this.lengthPrefixed(utf8.encode(value));
        return;
      }
      bytes[p++] = c;
    }
    this.pos = p;
  }

  /** A hex id (trace, span) as its binary bytes with their length. */
  hexId(hex: string): void {
    const n = hex.length >>> 1;
    this.uint32(n);
    this.ensure(n);
    const bytes = this.bytes;
    let p = this.pos;
    for (let i = 0; i < 2 * n; i += 2) {
      const high = hex.charCodeAt(i);
      const low = hex.charCodeAt(i + 1);
      // A table read for the ASCII a valid id is made of: no compare-and-branch chain per digit.
      bytes[p++] = ((high < 0x80 ? NIBBLES[high] : nibble(high)) << 4) | (low < 0x80 ? NIBBLES[low] : nibble(low));
    }
    this.pos = p;
  }

  /** Starts a length-delimited message; pass the result to `end`. */
  begin(): number {
    this.ensure(1);
    return this.pos++;
  }

  /**
   * Starts a message expected to be 128 bytes to 16 KiB long (a span, a scope's spans): two bytes reserved for its
   * length, so the usual case moves no content; pass the result to `endWide`.
   */
  beginWide(): number {
    this.ensure(2);
    const start = this.pos;
    this.pos += 2;
    return start;
  }

  /** Writes the length of the message begun at `start`, widening its one reserved byte when needed. */
  end(start: number): void {
    this.#close(start, 1);
  }

  /** `end` for `beginWide`: the content moves only when its length is not a two-byte varint. */
  endWide(start: number): void {
    this.#close(start, 2);
  }

  #close(start: number, reserved: number): void {
    const length = this.pos - start - reserved;
    const width = length < 0x80 ? 1 : length < 0x4000 ? 2 : length < 0x200000 ? 3 : length < 0x10000000 ? 4 : 5;
    if (width !== reserved) {
      if (width > reserved) this.ensure(width - reserved);
      this.bytes.copyWithin(start + width, start + reserved, this.pos);
      this.pos += width - reserved;
    }
    const bytes = this.bytes;
    let v = length;
    let p = start;
    while (v > 0x7f) {
      bytes[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    bytes[p] = v;
  }
}

const utf8 = new TextEncoder();

/**
 * Strings at least this long are checked and copied by one native UTF-8 write. A `charCodeAt` loop costs 30–45
 * instructions a character on a concatenated string (a request id from `randomUUID`, a response id), the
 * native call a few hundred once; below this length the loop costs less.
 */
const NATIVE_ASCII_MIN = 24;

/** `%TypedArray%.prototype.set`, read once (see `raw`). */
const typedArraySet = Uint8Array.prototype.set;

/** A DataView over exactly `bytes` (a small Buffer is a slice of node's shared pool, at an offset). */
function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Bytes of `value`'s varint (value in [0, 2^32)). */
export function varintLength(value: number): number {
  return value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5;
}

/** A hex digit's value; other characters map as the SDK's decoder maps them (upper-case letters included). */
function nibble(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 97 && code <= 102) return code - 87;
  return code - 55;
}

/** `nibble` of each ASCII code, negative values included (an invalid id's bytes stay what the SDK writes). */
const NIBBLES = Int16Array.from({ length: 0x80 }, (_, code) => nibble(code));
