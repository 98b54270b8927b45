import { ByteWriter } from './byte-writer';
import type { PyValue } from './py-value';

// Opcodes of pickle protocol 5 (CPython Lib/pickle.py names) that the block-hash tuple shapes use.
const PROTO = 0x80;
const FRAME = 0x95;
const STOP = 0x2e; // '.'
const NONE = 0x4e; // 'N'
const BININT = 0x4a; // 'J'
const BININT1 = 0x4b; // 'K'
const BININT2 = 0x4d; // 'M'
const SHORT_BINBYTES = 0x43; // 'C'
const BINBYTES = 0x42; // 'B'
const SHORT_BINUNICODE = 0x8c;
const BINUNICODE = 0x58; // 'X'
const EMPTY_TUPLE = 0x29; // ')'
const MARK = 0x28; // '('
const TUPLE = 0x74; // 't'
const TUPLE_N = [0, 0x85, 0x86, 0x87]; // TUPLE1..3
const MEMOIZE = 0x94;
/** CPython frames a pickle only when the frame holds at least this many bytes. */
const FRAME_SIZE_MIN = 4;

const utf8 = new TextEncoder();

/**
 * `pickle.dumps(value, protocol=5)` for the value shapes of vLLM's block hash input, byte for byte as CPython's C
 * pickler writes them: one frame (these inputs are far below the 64 KiB frame target), MEMOIZE after each bytes,
 * str and non-empty tuple, the smallest BININT form for ints in int32 range. Two equal strings are assumed to be
 * distinct objects (CPython would write a memo reference for the same object twice; vLLM's keys do not repeat).
 */
export function pickleDumps(value: PyValue, out: ByteWriter = new ByteWriter()): Uint8Array {
  out.reset();
  out.byte(PROTO);
  out.byte(5);
  const frameAt = out.length;
  out.byte(FRAME);
  out.u64le(0);
  const start = out.length;
  save(value, out);
  out.byte(STOP);
  const frameLen = out.length - start;
  if (frameLen >= FRAME_SIZE_MIN) {
    out.patchU64le(frameAt + 1, frameLen);
    return out.view();
  }
  const all = out.view();
  return Uint8Array.of(PROTO, 5, ...all.subarray(start));
}

function save(v: PyValue, out: ByteWriter): void {
  if (v === null) {
    out.byte(NONE);
  } else if (typeof v === 'number') {
    saveInt(v, out);
  } else if (typeof v === 'string') {
    const data = utf8.encode(v);
    if (data.length <= 0xff) {
      out.byte(SHORT_BINUNICODE);
      out.byte(data.length);
    } else {
      out.byte(BINUNICODE);
      out.u32le(data.length);
    }
    out.bytes(data);
    out.byte(MEMOIZE);
  } else if (v instanceof Uint8Array) {
    if (v.length <= 0xff) {
      out.byte(SHORT_BINBYTES);
      out.byte(v.length);
    } else {
      out.byte(BINBYTES);
      out.u32le(v.length);
    }
    out.bytes(v);
    out.byte(MEMOIZE);
  } else {
    saveTuple(v, out);
  }
}

function saveInt(v: number, out: ByteWriter): void {
  if (!Number.isInteger(v) || v < -0x80000000 || v > 0x7fffffff)
    throw new RangeError(`pickle: int ${v} outside the int32 range this encoder supports`);
  if (v >= 0 && v <= 0xff) {
    out.byte(BININT1);
    out.byte(v);
  } else if (v >= 0 && v <= 0xffff) {
    out.byte(BININT2);
    out.u16le(v);
  } else {
    out.byte(BININT);
    out.i32le(v);
  }
}

function saveTuple(items: readonly PyValue[], out: ByteWriter): void {
  const n = items.length;
  if (n === 0) {
    out.byte(EMPTY_TUPLE);
    return;
  }
  if (n <= 3) {
    for (const item of items) save(item, out);
    out.byte(TUPLE_N[n]);
  } else {
    out.byte(MARK);
    for (const item of items) save(item, out);
    out.byte(TUPLE);
  }
  out.byte(MEMOIZE);
}
