import { ProtoBuffer } from './proto-buffer';

/** A varint the plain way, for comparison. */
function varint(value: number): number[] {
  const out: number[] = [];
  let v = value;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

describe('ProtoBuffer', () => {
  it('writes a message’s length as the minimal varint whether one or two bytes were reserved for it', () => {
    for (const length of [0, 1, 127, 128, 300, 16383, 16384, 20000, 2 ** 21 - 1, 2 ** 21]) {
      const content = Buffer.alloc(length, 7);
      const expected = Buffer.from([0x0a, ...varint(length), ...content, 0x10]);
      for (const wide of [false, true]) {
        // A tiny initial buffer: growing while a message is open must keep what was written.
        const out = new ProtoBuffer(4);
        out.tag(1, 2);
        const start = wide ? out.beginWide() : out.begin();
        out.raw(content);
        if (wide) out.endWide(start);
        else out.end(start);
        out.byte(0x10);
        expect(Buffer.from(out.detach()).equals(expected)).toBe(true);
      }
    }
  });

  it('hands a request over with its buffer and goes on in a new one: the bytes handed over do not change', () => {
    const out = new ProtoBuffer(8);
    out.string('first request, longer than the buffer');
    const first = out.detach();
    const copy = Buffer.from(first);
    for (let i = 0; i < 100; i++) out.string(`later ${i}`);
    out.detach();
    out.string('x');
    expect(Buffer.from(first)).toEqual(copy);
    expect(Buffer.from(out.detach())).toEqual(Buffer.from([1, 0x78]));
  });

  it('copies id bytes from where they were drawn, and reports whether a string is ASCII before writing it', () => {
    const out = new ProtoBuffer(2);
    const pool = Buffer.from('00112233445566778899aabbccddeeff0102030405060708', 'hex');
    out.lengthPrefixedFrom(new DataView(pool.buffer, pool.byteOffset, pool.byteLength), 16, 8);
    expect(out.ascii('plain')).toBe(true);
    expect(out.ascii('not ü')).toBe(false);
    expect(Buffer.from(out.detach())).toEqual(Buffer.from([8, 1, 2, 3, 4, 5, 6, 7, 8, ...Buffer.from('plain')]));
  });

  it('writes a string as it is only when every unit is ASCII, on either side of the native write’s length', () => {
    const out = new ProtoBuffer(4);
    const expected: number[] = [];
    for (const n of [1, 23, 24, 25, 36, 200]) {
      // A concatenation, as request ids are built.
      const plain = 'a'.repeat(n - 1) + String.fromCharCode(0x7f);
      expect(out.ascii(plain)).toBe(true);
      expected.push(...Buffer.from(plain, 'latin1'));
      for (const odd of ['é', '\u0080', '\ud800', '\udc00', '🚀', '日']) {
        for (const at of [0, Math.floor(n / 2), n - 1]) {
          const text = 'b'.repeat(at) + odd + 'c'.repeat(Math.max(0, n - at - 1));
          const before = out.pos;
          expect(out.ascii(text)).toBe(false);
          expect(out.pos).toBe(before);
        }
      }
    }
    expect(Buffer.from(out.detach())).toEqual(Buffer.from(expected));
  });

  it('copies ids from pools taken in turn, at any offset of the pool and of the output, four bytes at a time', () => {
    const out = new ProtoBuffer(3);
    // Small Buffers are slices of node's shared pool: their bytes start at an offset of their ArrayBuffer.
    const first = Buffer.from('00112233445566778899aabbccddeeff0102030405060708', 'hex');
    const second = new Uint8Array(Buffer.from('f0e0d0c0b0a090807060504030201000', 'hex'));
    const expected: number[] = [];
    out.byte(0x2a);
    expected.push(0x2a);
    for (const [pool, at, length] of [
      [first, 16, 8],
      [second, 0, 16],
      [first, 4, 16],
      [second, 3, 8],
      [first, 0, 8],
    ] as const) {
      out.lengthPrefixedFrom(new DataView(pool.buffer, pool.byteOffset, pool.byteLength), at, length);
      expected.push(length, ...pool.subarray(at, at + length));
    }
    expect(Buffer.from(out.detach())).toEqual(Buffer.from(expected));
  });
});
