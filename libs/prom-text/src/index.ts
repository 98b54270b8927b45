export { parsePrometheusText, parseSampleValue, parseSampleValueBytes } from './parse';
export type { MetricFamily, MetricType, Sample, ParseOptions } from './parse';
export { sumSamples, maxSample, histogramTotals } from './aggregate';
