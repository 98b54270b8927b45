import { Buckets, ScrapeFreshnessRecordSchema, scrapeFreshnessKey } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { captureLogger } from '@triad/runtime/testing';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { WatcherMetrics } from '../ops/metrics';
import { ScrapeFreshnessPublisher, type FreshnessKv } from './scrape-freshness';

describe('ScrapeFreshnessPublisher', () => {
  let nats: NatsServerHandle;
  let bus: Bus;
  const { logger, lines } = captureLogger('test');

  beforeAll(async () => {
    nats = await startNatsServer();
    bus = await connectBus({ servers: nats.url, name: 'freshness-test' });
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.close();
  });

  it('writes its confirmation under its key, only when there is one and it moved on, on its period', async () => {
    const kv = await bus.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema);
    let confirmedAt: number | undefined;
    const metrics = new WatcherMetrics({ defaultMetrics: false });
    const publisher = new ScrapeFreshnessPublisher({
      open: () => bus.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema),
      identity: 'watcher.pod-0',
      periodMs: 50,
      confirmedAt: () => confirmedAt,
      logger,
      metrics,
    });
    const key = scrapeFreshnessKey('watcher.pod-0');
    expect(key).toBe('watcher_pod-0');
    try {
      await publisher.publish();
      expect(await kv.getEntry(key)).toBeUndefined();
      expect(publisher.confirmedAt).toBeUndefined();
      confirmedAt = 1_000.7;
      await publisher.publish();
      expect(publisher.confirmedAt).toBe(1000);
      const first = await kv.getEntry(key);
      expect(first?.value).toEqual({ schemaVersion: 1, replica: 'watcher.pod-0', confirmedAt: 1000 });
      // Nothing new: nothing written.
      await publisher.publish();
      expect((await kv.getEntry(key))?.revision).toBe(first?.revision);
      publisher.start();
      confirmedAt = 2_000;
      await waitFor(async () => (await kv.get(key))?.confirmedAt === 2000, { what: 'the next period written' });
      const ok = await metrics.registry.getSingleMetricAsString('triad_podwatcher_kv_writes_total');
      expect(ok).toContain(`bucket="${Buckets.scrapeFreshness}",op="put",result="ok"} 2`);
    } finally {
      await publisher.stop();
    }
  });

  it('logs a failed write once and writes again at a later period with the bucket reopened', async () => {
    let opens = 0;
    let failing = true;
    const real = await bus.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema);
    const flaky: FreshnessKv = {
      put: (k, v) => (failing ? Promise.reject(new Error('no responders')) : real.put(k, v)),
    };
    let confirmedAt = 5_000;
    const publisher = new ScrapeFreshnessPublisher({
      open: async () => {
        opens += 1;
        return flaky;
      },
      identity: 'flaky',
      periodMs: 20,
      confirmedAt: () => (confirmedAt += 10),
      logger,
    });
    lines.length = 0;
    try {
      publisher.start();
      await waitFor(() => opens >= 3, { what: 'three attempts, each with the bucket opened again' });
      expect(lines.filter((l) => String(l['msg']).startsWith('scrape freshness not written')).length).toBe(1);
      failing = false;
      await waitFor(async () => ((await real.get('flaky'))?.confirmedAt ?? 0) > 5_000, { what: 'written once NATS answers' });
      await waitFor(() => lines.some((l) => l['msg'] === 'scrape freshness written again'), { what: 'the recovery logged' });
    } finally {
      await publisher.stop();
    }
  });
});
