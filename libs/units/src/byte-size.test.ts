import { checkByteSize, formatByteSize, parseByteSize } from './byte-size';

describe('parseByteSize', () => {
  it.each([
    ['1048576', 1_048_576],
    [4096, 4096],
    ['10MiB', 10 * 2 ** 20],
    ['10 MiB', 10 * 2 ** 20],
    ['10Mi', 10 * 2 ** 20],
    ['10mib', 10 * 2 ** 20],
    ['512KiB', 512 * 1024],
    ['1.5GiB', 1.5 * 2 ** 30],
    ['10MB', 10_000_000],
    ['10M', 10_000_000],
    ['64k', 64_000],
    ['2GB', 2e9],
    ['100B', 100],
    ['100 b', 100],
    [' 8KiB ', 8192],
  ] as const)('%j → %d bytes', (value, bytes) => {
    expect(parseByteSize(value)).toBe(bytes);
  });

  it.each(['', 'big', '10XB', '-1', '-1MiB', '10 M iB', '1e6', '10MiBs', 'MiB'])('rejects %j', (text) => {
    expect(parseByteSize(text)).toBeUndefined();
  });
});

describe('checkByteSize', () => {
  it('returns whole bytes within the bounds', () => {
    expect(checkByteSize('10MiB', { min: 1024 })).toEqual({ ok: true, value: 10_485_760 });
    expect(checkByteSize(2048, { min: 1024 })).toEqual({ ok: true, value: 2048 });
  });

  it('says what it accepts and repeats the value', () => {
    expect(checkByteSize('10XB')).toEqual({
      ok: false,
      error: "expected a size such as 10MiB, 512KiB or 1GB (a bare number is bytes), got '10XB'",
    });
  });

  it('names the bound it breaks', () => {
    expect(checkByteSize('12', { min: 1024 })).toEqual({ ok: false, error: "must be at least 1 KiB, got '12'" });
    expect(checkByteSize('2GiB', { max: 2 ** 30 })).toEqual({ ok: false, error: "must be at most 1 GiB, got '2GiB'" });
    expect(checkByteSize('0.1KiB')).toEqual({ ok: false, error: "must be a whole number of bytes, got '0.1KiB'" });
  });
});

describe('formatByteSize', () => {
  it.each([
    [10 * 2 ** 20, '10 MiB'],
    [8 * 2 ** 20, '8 MiB'],
    [1536, '1536 bytes'],
    [1024, '1 KiB'],
    [1000, '1000 bytes'],
    [2 ** 30, '1 GiB'],
  ])('%d → %s', (bytes, text) => {
    expect(formatByteSize(bytes)).toBe(text);
    expect(parseByteSize(text.replace(' bytes', ''))).toBe(bytes);
  });
});
