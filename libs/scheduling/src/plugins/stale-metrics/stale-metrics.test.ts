import { applyFilter, buildIndex, candidatesOf, pluginContext, type EndpointSpec } from '../../testing';
import { TEST_NOW } from '../../testing/clock';
import { StaleMetricsFilter } from './stale-metrics';

function run(specs: EndpointSpec[]): string[] {
  const c = candidatesOf(
    buildIndex(specs),
    specs.map((s) => s.pod),
  );
  return applyFilter(new StaleMetricsFilter('stale-metrics', { maxAgeMs: 1000 }), pluginContext({ now: TEST_NOW }), c);
}

describe('stale-metrics', () => {
  it('drops endpoints marked stale, never scraped, or older than maxAgeMs', () => {
    expect(
      run([
        { pod: 'fresh', scrapedAt: TEST_NOW - 500 },
        { pod: 'edge', scrapedAt: TEST_NOW - 1000 },
        { pod: 'old', scrapedAt: TEST_NOW - 1001 },
        { pod: 'flagged', scrapedAt: TEST_NOW - 10, stale: true },
        { pod: 'never', scrapedAt: 0 },
      ]),
    ).toEqual(['fresh', 'edge']);
  });

  it('keeps them all when every endpoint is stale', () => {
    expect(
      run([
        { pod: 'old', scrapedAt: TEST_NOW - 5000 },
        { pod: 'never', scrapedAt: 0 },
      ]),
    ).toEqual(['old', 'never']);
  });
});
