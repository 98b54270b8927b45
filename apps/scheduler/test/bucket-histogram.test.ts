import { Histogram, Registry } from 'prom-client';
import { BucketHistogram } from '../src/bucket-histogram';

const BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];
/** On bounds, between them, above the last, zero, and sums that are not exact in binary. */
const VALUES = [0, 0.00005, 0.00007, 0.0001, 0.0003, 0.1, 0.1000001, 7, 0.0025, 0.0000001, 0.3, 0.00025];

describe('BucketHistogram against prom-client Histogram', () => {
  it('exposes the same text for the same observations, with a label and without, and after a reset', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const labelled = new BucketHistogram({ name: 'x_seconds', help: 'h', buckets: BUCKETS, label: 'mode', registers: [ours] });
    const reference = new Histogram({ name: 'x_seconds', help: 'h', buckets: BUCKETS, labelNames: ['mode'], registers: [theirs] });
    const plain = new BucketHistogram({ name: 'y_size', help: 'batch', buckets: [1, 2, 4, 8], registers: [ours] });
    const plainReference = new Histogram({ name: 'y_size', help: 'batch', buckets: [1, 2, 4, 8], registers: [theirs] });
    // Nothing observed yet: the label-less histogram shows zeros, the labelled one nothing.
    expect(await ours.metrics()).toBe(await theirs.metrics());
    const epd = labelled.child('epd');
    const pd = labelled.child('pd');
    VALUES.forEach((v, i) => {
      (i % 3 === 0 ? pd : epd).observe(v);
      reference.labels(i % 3 === 0 ? 'pd' : 'epd').observe(v);
      plain.observe(i % 10);
      plainReference.observe(i % 10);
    });
    const text = await ours.metrics();
    expect(text).toBe(await theirs.metrics());
    expect(text).toContain('x_seconds_bucket{le="0.00025",mode="epd"}');
    labelled.reset();
    reference.reset();
    plain.reset();
    plainReference.reset();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('refuses a value that is not a finite number, as prom-client does', () => {
    const h = new BucketHistogram({ name: 'z', help: 'h', buckets: [1], registers: [] });
    expect(() => h.observe(Number.NaN)).toThrow(TypeError);
    expect(() => h.child('a')).toThrow('has no label');
  });
});
