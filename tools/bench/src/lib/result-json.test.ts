import { parseResults, stringifyResults } from './result-json';

describe('result JSON', () => {
  it('reads back an infinite latency as infinite, not as the null plain JSON writes', () => {
    const results = { p99: Infinity, low: -Infinity, p50: 12.5, name: 'triad', missing: null };
    expect(JSON.parse(JSON.stringify(results)).p99).toBeNull();
    expect(parseResults(stringifyResults(results))).toEqual(results);
  });
});
