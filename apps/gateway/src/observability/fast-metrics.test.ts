import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { FastCounter, FastGauge, FastHistogram } from './fast-metrics';

const BUCKETS = [0.001, 0.01, 0.1, 1];

describe('fast metrics', () => {
  it('export exactly what prom-client exports for the same updates', async () => {
    const prom = new Registry();
    const fast = new Registry();
    const labelNames = ['model', 'path'];
    const pc = new Counter({ name: 'c_total', help: 'c', labelNames, registers: [prom] });
    const fc = new FastCounter({ name: 'c_total', help: 'c', labelNames, registers: [fast] });
    const pg = new Gauge({ name: 'g', help: 'g', labelNames: ['model'], registers: [prom] });
    const fg = new FastGauge({ name: 'g', help: 'g', labelNames: ['model'], registers: [fast] });
    const pu = new Gauge({ name: 'u', help: 'unlabelled', registers: [prom] });
    const fu = new FastGauge({ name: 'u', help: 'unlabelled', registers: [fast] });
    const ph = new Histogram({ name: 'h_seconds', help: 'h', labelNames, buckets: BUCKETS, registers: [prom] });
    const fh = new FastHistogram({ name: 'h_seconds', help: 'h', labelNames, buckets: BUCKETS, registers: [fast] });
    const pb = new Histogram({ name: 'b', help: 'unlabelled histogram', buckets: [1, 2, 4], registers: [prom] });
    const fb = new FastHistogram({ name: 'b', help: 'unlabelled histogram', buckets: [1, 2, 4], registers: [fast] });

    pc.labels('m', '/v1/chat/completions').inc();
    pc.labels('m', '/v1/chat/completions').inc(2);
    pc.labels('other', '/v1/completions').inc(5);
    fc.labels('m', '/v1/chat/completions').inc();
    fc.labels('m', '/v1/chat/completions').inc(2);
    fc.labels('other', '/v1/completions').inc(5);
    pg.labels('m').inc();
    pg.labels('m').inc();
    pg.labels('m').dec();
    fg.labels('m').inc();
    fg.labels('m').inc();
    fg.labels('m').dec();
    pu.inc(3);
    fu.labels().inc(3);
    for (const v of [0.0005, 0.005, 0.05, 0.5, 5, 0.01]) {
      ph.labels('m', '/v1/chat/completions').observe(v);
      fh.labels('m', '/v1/chat/completions').observe(v);
    }
    // Children that were created but never updated are not exported (prom-client creates them on first use).
    fh.labels('idle', '/v1/completions');
    fc.labels('idle', '/v1/completions');
    pb.observe(3);
    fb.labels().observe(3);

    expect(await fast.metrics()).toBe(await prom.metrics());
  });

  it('export unlabelled metrics before any update, and again after a reset', async () => {
    const prom = new Registry();
    const fast = new Registry();
    new Gauge({ name: 'active', help: 'a', registers: [prom] });
    new FastGauge({ name: 'active', help: 'a', registers: [fast] });
    new Histogram({ name: 'sizes', help: 's', buckets: [1, 2], registers: [prom] });
    new FastHistogram({ name: 'sizes', help: 's', buckets: [1, 2], registers: [fast] });
    expect(await fast.metrics()).toBe(await prom.metrics());
    fast.resetMetrics();
    prom.resetMetrics();
    expect(await fast.metrics()).toBe(await prom.metrics());
  });
});
