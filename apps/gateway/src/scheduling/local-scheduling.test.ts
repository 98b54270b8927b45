import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AffinityBatchSchema,
  Buckets,
  ConfigKeys,
  EndpointRecordSchema,
  ScrapeFreshnessRecordSchema,
  Subjects,
  type AffinityBatch,
} from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { DEFAULT_STAGE_TIMEOUTS } from '@triad/request';
import { createLogger } from '@triad/runtime';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { PrefixCacheScorer } from '@triad/scheduling';
import { endpointRecord, keyOf, modelServerRecord, schedulingRequest } from '@triad/scheduling/testing';
import { z } from 'zod';
import { KvView } from '../state/kv-view';
import { LocalSchedulingFallback } from './local-scheduling';

describe('the local fallback follows the scheduler config key and shares affinity', () => {
  let nats: NatsServerHandle;
  let bus: Bus;
  let fallback: LocalSchedulingFallback | undefined;

  beforeAll(async () => {
    nats = await startNatsServer();
    bus = await connectBus({ servers: nats.url, name: 'local-scheduling-test' });
  });
  afterAll(async () => {
    fallback?.stop();
    await bus?.close();
    await nats?.close();
  });

  it('learns where the scheduler replicas sent prompts, and publishes what its own decisions teach', async () => {
    const logger = createLogger({ service: 'test', level: 'silent' });
    const local = new LocalSchedulingFallback(new KvView(DEFAULT_STAGE_TIMEOUTS, () => undefined), 'gw-2', logger);
    try {
      local.local.applyModelServer({ op: 'PUT', value: modelServerRecord() });
      for (const pod of ['a', 'b', 'c'])
        local.local.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod, scrapedAt: Date.now() + 3_600_000 }) });
      local.followAffinity(bus);
      const seen: AffinityBatch[] = [];
      const sub = bus.subscribe(Subjects.affinity, AffinityBatchSchema, (b) => seen.push(b));
      await bus.nc.flush();
      // A scheduler replica sent this prompt to c: the fallback must now prefer c for it.
      bus.publish(Subjects.affinity, AffinityBatchSchema, {
        v: 1,
        origin: 'replica-x',
        records: [{ model: 'm', endpoint: keyOf('c'), role: 'aggregated', prefixHashes: ['h1', 'h2'] }],
      });
      const table = local.local.scheduler.config.plugins.get('prefix-cache') as PrefixCacheScorer;
      await waitFor(() => table.store.owners('m', 'h2')?.has(keyOf('c')) === true, { what: 'the record applied' });
      const d = local.schedule(schedulingRequest({ id: 'r-1', prefixHashes: ['h1', 'h2', 'h3'] }));
      expect(d.ok && d.attempts[0].endpoint.pod).toBe('c');
      await waitFor(() => seen.some((b) => b.origin === 'gw-2/local'), { what: "the fallback's own record published" });
      expect(seen.find((b) => b.origin === 'gw-2/local')!.records).toEqual([
        { model: 'm', endpoint: keyOf('c'), role: 'aggregated', prefixHashes: ['h1', 'h2', 'h3'] },
      ]);
      sub.unsubscribe();
    } finally {
      local.stop();
    }
  });

  it("ages endpoints by their pod-watcher replica's scrape freshness, from KV and for a fallback added later", async () => {
    const logger = createLogger({ service: 'test', level: 'silent' });
    const view = new KvView(DEFAULT_STAGE_TIMEOUTS, () => undefined);
    const early = new LocalSchedulingFallback(view, 'gw-3', logger);
    try {
      await view.start(bus);
      const minuteAgo = Date.now() - 60_000;
      const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
      await endpoints.put(keyOf('fresh'), endpointRecord({ pod: 'fresh', scrapedAt: minuteAgo, scrapedBy: 'w1' }));
      const freshness = await bus.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema);
      const confirmedAt = Date.now() - 1000;
      await freshness.put('w1', { schemaVersion: 1, replica: 'w1', confirmedAt });
      await waitFor(() => early.local.index.get(keyOf('fresh'))?.scrapedAt === confirmedAt, { what: 'the fallback aged the endpoint' });
      const late = new LocalSchedulingFallback(view, 'gw-4', logger);
      expect(late.local.index.get(keyOf('fresh'))?.scrapedAt).toBe(confirmedAt);
      late.stop();
    } finally {
      early.stop();
      view.stop();
    }
  });

  it('applies a put, and goes back to the defaults when the key is deleted', async () => {
    const logger = createLogger({ service: 'test', level: 'silent' });
    fallback = new LocalSchedulingFallback(new KvView(DEFAULT_STAGE_TIMEOUTS, () => undefined), 'gw-1', logger);
    await fallback.followConfig(bus);
    expect(fallback.local.scheduler.config.topN).toBe(5);
    const kv = await bus.kv(Buckets.config, z.unknown(), { history: 5 });
    await kv.put(ConfigKeys.scheduler, { topN: 2, plugins: [{ type: 'prefix-cache', args: { blockSizeToHash: 32 } }] });
    await waitFor(() => fallback!.local.scheduler.config.topN === 2, { what: 'the put applied' });
    expect(fallback.hashOptions.blockSize).toBe(32);
    await kv.delete(ConfigKeys.scheduler);
    await waitFor(() => fallback!.local.scheduler.config.topN === 5, { what: 'the defaults back after the delete' });
    expect(fallback.hashOptions.blockSize).toBe(64);
  });
});

describe('the local fallback follows the scheduler config file as the scheduler service does', () => {
  let nats: NatsServerHandle;
  let bus: Bus;
  const dir = mkdtempSync(join(tmpdir(), 'triad-gw-sched-config-'));

  beforeAll(async () => {
    nats = await startNatsServer();
    bus = await connectBus({ servers: nats.url, name: 'local-scheduling-file-test' });
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reloads the file when it changes, and lets a KV config override it until the key is deleted', async () => {
    const path = join(dir, 'scheduler.yaml');
    writeFileSync(path, 'topN: 3\n');
    const fallback = new LocalSchedulingFallback(
      new KvView(DEFAULT_STAGE_TIMEOUTS, () => undefined),
      'gw-file',
      createLogger({ service: 'test', level: 'silent' }),
    );
    try {
      fallback.useConfigFile(path);
      expect([fallback.local.scheduler.config.topN, fallback.local.activeConfig.origin]).toEqual([3, 'file']);
      writeFileSync(path, 'topN: 4\nplugins: [{type: prefix-cache, args: {blockSizeToHash: 16}}]\n');
      await waitFor(() => fallback.local.scheduler.config.topN === 4, { what: 'the edited file applied' });
      expect(fallback.hashOptions.blockSize).toBe(16);
      await fallback.followConfig(bus);
      const kv = await bus.kv(Buckets.config, z.unknown(), { history: 5 });
      await kv.put(ConfigKeys.scheduler, { topN: 2 });
      await waitFor(() => fallback.local.activeConfig.origin === 'kv', { what: 'the KV config over the file' });
      expect(fallback.local.scheduler.config.topN).toBe(2);
      await kv.delete(ConfigKeys.scheduler);
      await waitFor(() => fallback.local.activeConfig.origin === 'file', { what: 'the file back after the delete' });
      expect([fallback.local.scheduler.config.topN, fallback.hashOptions.blockSize]).toEqual([4, 16]);
    } finally {
      fallback.stop();
    }
  });
});
