import { parseGoDuration } from './duration';

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
