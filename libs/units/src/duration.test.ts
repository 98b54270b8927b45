import { checkDuration, formatDuration, parseDuration, parseGoDuration } from './duration';

describe('parseGoDuration', () => {
  it.each([
    ['0', 0],
    ['100ms', 100],
    ['10s', 10_000],
    ['1m30s', 90_000],
    ['1.5h', 5_400_000],
    ['2h45m', 9_900_000],
    ['500us', 0.5],
    ['250µs', 0.25],
    ['1000000ns', 1],
    ['.5s', 500],
    ['1m0.5s', 60_500],
  ])('%s → %d ms', (text, ms) => {
    expect(parseGoDuration(text)).toBeCloseTo(ms, 9);
  });

  it.each(['', '10', 's', '1x', '-1s', '1s ', ' 1s', '1.2.3s', 'ms', '1m30', '10sec'])('rejects %j', (text) => {
    expect(parseGoDuration(text)).toBeUndefined();
  });
});

describe('parseDuration (settings and flags)', () => {
  it.each([
    ['250', 'ms', 250],
    ['250', 's', 250_000],
    [250, 'ms', 250],
    [1.5, 's', 1500],
    ['10s', 'ms', 10_000],
    ['10s', 's', 10_000],
    ['1m30s', 's', 90_000],
    ['1m 30s', 'ms', 90_000],
    ['30 s', 'ms', 30_000],
    [' 500ms ', 'ms', 500],
    ['0', 's', 0],
  ] as const)('%j with bare %s → %d ms', (value, bareUnit, ms) => {
    expect(parseDuration(value, bareUnit)).toBe(ms);
  });

  it.each(['', 'fast', '10x', '-5', '-1s', '1s2', 'Infinity', '10 sec'])('rejects %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });

  it('rejects negative and non-finite numbers', () => {
    expect(parseDuration(-1)).toBeUndefined();
    expect(parseDuration(Number.NaN)).toBeUndefined();
  });
});

describe('checkDuration', () => {
  it('returns whole milliseconds within the bounds', () => {
    expect(checkDuration('2s', { min: 50 })).toEqual({ ok: true, value: 2000 });
    expect(checkDuration('90', { bareUnit: 's', max: 3_600_000 })).toEqual({ ok: true, value: 90_000 });
  });

  it('says what it accepts and repeats the value', () => {
    expect(checkDuration('fast')).toEqual({
      ok: false,
      error: "expected a duration such as 500ms, 10s or 1m30s (a bare number is milliseconds), got 'fast'",
    });
    expect(checkDuration('soon', { bareUnit: 's' })).toEqual({
      ok: false,
      error: "expected a duration such as 500ms, 10s or 1m30s (a bare number is seconds), got 'soon'",
    });
    expect(checkDuration(true)).toEqual({ ok: false, error: expect.stringMatching(/^expected a duration .*, got true$/) });
  });

  it('names the bound it breaks in the same units', () => {
    expect(checkDuration('10ms', { min: 50 })).toEqual({ ok: false, error: "must be at least 50ms, got '10ms'" });
    expect(checkDuration('2h', { max: 3_600_000 })).toEqual({ ok: false, error: "must be at most 1h, got '2h'" });
    expect(checkDuration('1.5ms')).toEqual({ ok: false, error: "must be a whole number of milliseconds, got '1.5ms'" });
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [500, '500ms'],
    [1500, '1.5s'],
    [10_000, '10s'],
    [90_000, '1m30s'],
    [600_000, '10m'],
    [3_600_000, '1h'],
    [3_690_000, '1h1m30s'],
  ])('%d ms → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
    expect(parseDuration(text)).toBe(ms);
  });
});
