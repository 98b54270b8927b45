import { mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { Buckets, EndpointRecordSchema, ModelServerRecordSchema } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(30_000);

describe('NATS outage', () => {
  let nats: NatsServerHandle;
  let dir: string;
  let file: string;
  let starting: Promise<TestWatcher> | undefined;
  let watcher: TestWatcher;
  let reader: Bus | undefined;

  const write = (roleOfP0: string) => {
    const docs = [
      modelServer('qwen'),
      pod('p0', { app: 'qwen', group: 'g1', role: roleOfP0 }, { ip: '127.0.7.1' }),
      pod('d0', { app: 'qwen', group: 'g1', role: 'decode' }, { ip: '127.0.7.2' }),
    ];
    writeFileSync(`${file}.tmp`, docs.map((d) => stringify(d)).join('---\n'));
    renameSync(`${file}.tmp`, file);
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    dir = mkdtempSync(join(tmpdir(), 'triad-pw-nats-'));
    file = join(dir, 'cluster.yaml');
    write('prefill');
    starting = startTestWatcher({ nats: nats.url, source: `file:${file}` });
    watcher = await starting;
  }, 60_000);

  afterAll(async () => {
    await reader?.close();
    await (await starting?.catch(() => undefined))?.close();
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps computing while NATS is down and republishes the full state into a server that lost its store', async () => {
    await waitFor(() => watcher.ready, { what: 'ready' });
    await watcher.whenSettled();
    await nats.stop();
    write('decode');
    await waitFor(() => watcher.reconciler.table.get('default.qwen.p0')?.role === 'decode', { what: 'reclassified while NATS is down' });
    // The server comes back empty: no buckets, no records, no lease.
    for (const entry of readdirSync(nats.storeDir)) rmSync(join(nats.storeDir, entry), { recursive: true, force: true });
    await nats.start();
    reader = await connectBus({ servers: nats.url, name: 'test-reader' });
    const bus = reader;
    await waitFor(
      async () => {
        const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
        const servers = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
        const p0 = await endpoints.get('default.qwen.p0');
        const d0 = await endpoints.get('default.qwen.d0');
        return p0?.role === 'decode' && d0?.role === 'decode' && (await servers.get('default.qwen'))?.mode === 'pd';
      },
      { what: 'full state republished', timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(watcher.log.lines.some((l) => l['msg'] === 'published full state' && l['reason'] !== 'initial state')).toBe(true);
    expect(watcher.isLeader).toBe(true);
  });
});
