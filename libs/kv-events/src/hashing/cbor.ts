import { ByteWriter } from './byte-writer';
import type { PyValue } from './py-value';

const utf8 = new TextEncoder();

/**
 * `cbor2.dumps(value, canonical=True)` for the value shapes of vLLM's block hash input: tuples as definite-length
 * arrays, ints, byte and text strings in their shortest header, None as null (RFC 8949 §4.2 deterministic
 * encoding; these shapes have no maps or floats, so canonical ordering rules do not arise).
 */
export function cborDumps(value: PyValue, out: ByteWriter = new ByteWriter()): Uint8Array {
  out.reset();
  write(value, out);
  return out.view();
}

function head(major: number, n: number, out: ByteWriter): void {
  const m = major << 5;
  if (n < 24) out.byte(m | n);
  else if (n <= 0xff) {
    out.byte(m | 24);
    out.byte(n);
  } else if (n <= 0xffff) {
    out.byte(m | 25);
    out.u16be(n);
  } else if (n <= 0xffffffff) {
    out.byte(m | 26);
    out.u32be(n);
  } else {
    out.byte(m | 27);
    out.u64be(BigInt(n));
  }
}

function write(v: PyValue, out: ByteWriter): void {
  if (v === null) out.byte(0xf6);
  else if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`cbor: ${v} is not a safe integer`);
    if (v >= 0) head(0, v, out);
    else head(1, -1 - v, out);
  } else if (typeof v === 'string') {
    const data = utf8.encode(v);
    head(3, data.length, out);
    out.bytes(data);
  } else if (v instanceof Uint8Array) {
    head(2, v.length, out);
    out.bytes(v);
  } else {
    head(4, v.length, out);
    for (const item of v) write(item, out);
  }
}
