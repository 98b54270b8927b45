import { xxh64 } from '@node-rs/xxhash';
import { mediaContentKey } from './media-key';
import { prefixBlockHashes } from './prefix-hashes';

const hex = (h: bigint): string => h.toString(16).padStart(16, '0');

describe('prefixBlockHashes', () => {
  it('chains xxh64 over 64-char blocks seeded by the model hash', () => {
    const prompt = 'a'.repeat(64) + 'b'.repeat(10);
    const h0 = xxh64('m');
    const h1 = xxh64(h0.toString(10) + 'a'.repeat(64));
    const h2 = xxh64(h1.toString(10) + 'b'.repeat(10));
    expect(prefixBlockHashes('m', prompt)).toEqual([hex(h1), hex(h2)]);
  });

  it('shares leading hashes exactly as far as the prompts share whole blocks', () => {
    const common = 'x'.repeat(128);
    const a = prefixBlockHashes('m', `${common}${'y'.repeat(64)}`);
    const b = prefixBlockHashes('m', `${common}${'z'.repeat(64)}`);
    expect(a.slice(0, 2)).toEqual(b.slice(0, 2));
    expect(a[2]).not.toEqual(b[2]);
    expect(prefixBlockHashes('other', common)[0]).not.toEqual(a[0]);
  });

  it('hashes at most maxBlocks blocks, and nothing for an empty prompt', () => {
    expect(prefixBlockHashes('m', 'q'.repeat(64 * 200))).toHaveLength(128);
    expect(prefixBlockHashes('m', 'q'.repeat(100), { blockSize: 10, maxBlocks: 4 })).toHaveLength(4);
    expect(prefixBlockHashes('m', '')).toEqual([]);
  });
});

describe('mediaContentKey', () => {
  it('prefers the uuid of the part', () => {
    expect(mediaContentKey({ uuid: 'img-1', url: 'https://x/y.png' })).toBe('id:img-1');
  });

  it('keys data URLs by their payload, so the MIME prefix does not matter', () => {
    const a = mediaContentKey({ url: 'data:image/png;base64,AAAA' });
    expect(mediaContentKey({ url: 'data:image/x-png;base64,AAAA' })).toBe(a);
    expect(mediaContentKey({ data: 'AAAA' })).toBe(a);
    expect(mediaContentKey({ url: 'data:image/png;base64,AAAB' })).not.toBe(a);
    expect(a).toMatch(/^d:[0-9a-f]{16}$/);
  });

  it('keys http URLs by the URL', () => {
    expect(mediaContentKey({ url: 'https://x/cat.png' })).toBe(mediaContentKey({ url: 'https://x/cat.png' }));
    expect(mediaContentKey({ url: 'https://x/cat.png' })).not.toBe(mediaContentKey({ url: 'https://x/dog.png' }));
  });

  it('refuses a source with nothing to key', () => {
    expect(() => mediaContentKey({ url: '' })).toThrow(/no uuid, url or data/);
  });
});
