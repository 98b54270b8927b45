export { parsePrometheusText, parseSampleValueBytes } from './parse';
export type { MetricFamily } from './parse';
export { sumSamples, histogramTotals } from './aggregate';
