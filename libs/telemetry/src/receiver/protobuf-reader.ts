/**
 * A minimal protobuf wire-format reader: just what decoding OTLP needs (varints, fixed 32/64-bit, doubles and
 * length-delimited fields), so the receiver needs no generated code and no .proto files at run time.
 * Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 (3/4, the deprecated groups, are rejected).
 */
export const WireType = { Varint: 0, Fixed64: 1, LengthDelimited: 2, Fixed32: 5 } as const;

const utf8 = new TextDecoder('utf-8');

export class ProtoReader {
  #pos: number;
  readonly #end: number;
  readonly #buf: Uint8Array;
  readonly #view: DataView;

  constructor(buf: Uint8Array, start = 0, end = buf.length) {
    this.#buf = buf;
    this.#pos = start;
    this.#end = end;
    this.#view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  get done(): boolean {
    return this.#pos >= this.#end;
  }

  #need(n: number): void {
    if (this.#pos + n > this.#end) throw new Error(`protobuf: truncated message at byte ${this.#pos}`);
  }

  /** Reads a field key: field number and wire type. */
  key(): { field: number; wire: number } {
    const k = this.uint32();
    return { field: k >>> 3, wire: k & 7 };
  }

  /** A varint that fits 32 bits (field keys, lengths, enums, counts). */
  uint32(): number {
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      this.#need(1);
      const b = this.#buf[this.#pos++];
      result += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return result >>> 0 === result ? result : result % 2 ** 32;
    }
    // Longer varints (negative int32 enums are sign-extended to 10 bytes): read on as 64-bit, keep the low bits.
    this.#pos -= 5;
    return Number(BigInt.asUintN(32, this.uint64()));
  }

  /** A full 64-bit varint, unsigned. */
  uint64(): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      this.#need(1);
      const b = this.#buf[this.#pos++];
      result |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return BigInt.asUintN(64, result);
    }
    throw new Error(`protobuf: varint longer than 10 bytes at byte ${this.#pos}`);
  }

  /** A two's-complement int64 varint. */
  int64(): bigint {
    return BigInt.asIntN(64, this.uint64());
  }

  bool(): boolean {
    return this.uint32() !== 0;
  }

  fixed64(): bigint {
    this.#need(8);
    const v = this.#view.getBigUint64(this.#pos, true);
    this.#pos += 8;
    return v;
  }

  fixed32(): number {
    this.#need(4);
    const v = this.#view.getUint32(this.#pos, true);
    this.#pos += 4;
    return v;
  }

  double(): number {
    this.#need(8);
    const v = this.#view.getFloat64(this.#pos, true);
    this.#pos += 8;
    return v;
  }

  bytes(): Uint8Array {
    const len = this.uint32();
    this.#need(len);
    const out = this.#buf.subarray(this.#pos, this.#pos + len);
    this.#pos += len;
    return out;
  }

  string(): string {
    return utf8.decode(this.bytes());
  }

  /** A reader over an embedded message (length-delimited field). */
  message(): ProtoReader {
    const len = this.uint32();
    this.#need(len);
    const sub = new ProtoReader(this.#buf, this.#pos, this.#pos + len);
    this.#pos += len;
    return sub;
  }

  /** Skips a field of an unknown number, so newer OTLP fields never break decoding. */
  skip(wire: number): void {
    switch (wire) {
      case WireType.Varint:
        this.uint64();
        return;
      case WireType.Fixed64:
        this.#need(8);
        this.#pos += 8;
        return;
      case WireType.LengthDelimited: {
        const len = this.uint32();
        this.#need(len);
        this.#pos += len;
        return;
      }
      case WireType.Fixed32:
        this.#need(4);
        this.#pos += 4;
        return;
      default:
        throw new Error(`protobuf: unsupported wire type ${wire} at byte ${this.#pos}`);
    }
  }
}

/** Lower-case hex of a byte string (trace and span ids). */
export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}
