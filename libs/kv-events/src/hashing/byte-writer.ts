/** A growable byte buffer for the small serializations block hashing needs (one per block, reused). */
export class ByteWriter {
  #buf = new Uint8Array(256);
  #view = new DataView(this.#buf.buffer);
  length = 0;

  reset(): this {
    this.length = 0;
    return this;
  }

  #ensure(extra: number): void {
    if (this.length + extra <= this.#buf.length) return;
    const next = new Uint8Array(Math.max(this.#buf.length * 2, this.length + extra));
    next.set(this.#buf.subarray(0, this.length));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }

  byte(b: number): void {
    this.#ensure(1);
    this.#buf[this.length++] = b;
  }

  bytes(data: Uint8Array): void {
    this.#ensure(data.length);
    this.#buf.set(data, this.length);
    this.length += data.length;
  }

  u16be(v: number): void {
    this.#ensure(2);
    this.#view.setUint16(this.length, v);
    this.length += 2;
  }

  u16le(v: number): void {
    this.#ensure(2);
    this.#view.setUint16(this.length, v, true);
    this.length += 2;
  }

  u32be(v: number): void {
    this.#ensure(4);
    this.#view.setUint32(this.length, v);
    this.length += 4;
  }

  u32le(v: number): void {
    this.#ensure(4);
    this.#view.setUint32(this.length, v >>> 0, true);
    this.length += 4;
  }

  i32le(v: number): void {
    this.#ensure(4);
    this.#view.setInt32(this.length, v, true);
    this.length += 4;
  }

  u64be(v: bigint): void {
    this.#ensure(8);
    this.#view.setBigUint64(this.length, v);
    this.length += 8;
  }

  u64le(v: number): void {
    this.#ensure(8);
    this.#view.setBigUint64(this.length, BigInt(v), true);
    this.length += 8;
  }

  /** Overwrites 8 bytes at `at` with a little-endian length (pickle FRAME headers are patched in afterwards). */
  patchU64le(at: number, v: number): void {
    this.#view.setBigUint64(at, BigInt(v), true);
  }

  /** The bytes written so far (a view, valid until the next write). */
  view(): Uint8Array {
    return this.#buf.subarray(0, this.length);
  }
}
