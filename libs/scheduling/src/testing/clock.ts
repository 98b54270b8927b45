/**
 * A fixed clock for the lib's own tests: the builders scrape metrics at `TEST_NOW - 500`. Kept off the
 * `@triad/scheduling/testing` entry because no other package reads it.
 */
export const TEST_NOW = 1_700_000_000_000;
