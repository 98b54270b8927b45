import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { Buckets, EndpointRecordSchema } from '@triad/bus';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { KvMirror, startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(30_000);

/** An engine whose metrics never change, so any rewrite of its record would be flapping. */
async function steadyEngine(host: string, port = 0): Promise<{ server: Server; port: number; scrapes: () => number }> {
  let scrapes = 0;
  const server = createServer((req, res) => {
    if (req.url === '/metrics') scrapes += 1;
    if (req.url === '/v1/models') res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[{"id":"m"}]}');
    else res.writeHead(200).end('vllm:num_requests_running 2\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.5\n');
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return { server, port: (server.address() as AddressInfo).port, scrapes: () => scrapes };
}

describe('two pod-watcher replicas at once', () => {
  let nats: NatsServerHandle;
  let dir: string;
  let file: string;
  const engines: Awaited<ReturnType<typeof steadyEngine>>[] = [];
  const starting: Promise<TestWatcher>[] = [];
  let a: TestWatcher;
  let b: TestWatcher;
  let endpoints: KvMirror<typeof EndpointRecordSchema>;

  const write = (roleOfP0: string) => {
    const docs = [
      modelServer('qwen', { port: engines[0].port }),
      pod('p0', { app: 'qwen', group: 'g1', role: roleOfP0 }, { ip: '127.0.6.1' }),
      pod('d0', { app: 'qwen', group: 'g1', role: 'decode' }, { ip: '127.0.6.2' }),
    ];
    writeFileSync(`${file}.tmp`, docs.map((d) => stringify(d)).join('---\n'));
    renameSync(`${file}.tmp`, file);
  };
  const totalScrapes = () => engines.reduce((n, e) => n + e.scrapes(), 0);

  beforeAll(async () => {
    nats = await startNatsServer();
    engines.push(await steadyEngine('127.0.6.1'));
    engines.push(await steadyEngine('127.0.6.2', engines[0].port));
    dir = mkdtempSync(join(tmpdir(), 'triad-pw-replicas-'));
    file = join(dir, 'cluster.yaml');
    write('prefill');
    endpoints = await KvMirror.open(nats.url, Buckets.endpoints, EndpointRecordSchema);
    starting.push(
      startTestWatcher({
        nats: nats.url,
        source: `file:${file}`,
        identity: 'replica-a',
        leaseTtlMs: 2000,
        scrapeTimeoutMs: 3000,
      }),
    );
    a = await starting[0];
    starting.push(
      startTestWatcher({
        nats: nats.url,
        source: `file:${file}`,
        identity: 'replica-b',
        leaseTtlMs: 2000,
        scrapeTimeoutMs: 3000,
      }),
    );
    b = await starting[1];
  }, 60_000);

  afterAll(async () => {
    await endpoints?.close();
    for (const s of starting) await (await s.catch(() => undefined))?.close();
    for (const e of engines) {
      e.server.closeAllConnections();
      await new Promise((r) => e.server.close(r));
    }
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has exactly one writer; both are ready (the other as a hot standby)', async () => {
    await waitFor(() => a.ready && b.ready, { what: 'both ready' });
    expect([a.isLeader, b.isLeader]).toEqual([true, false]);
    await waitFor(() => endpoints.get('default.qwen.p0')?.metrics.scrapedAt && endpoints.get('default.qwen.d0')?.metrics.scrapedAt, {
      what: 'scraped records',
    });
  });

  it("does not rewrite records while nothing changes, each engine scraped by its shard's owner", async () => {
    // Both replicas saw the other join, then published their shard: by a resync, or by their first full sync when
    // the join came before their source had synced (that sync publishes the whole shard; no resync runs before it).
    const shardPublished = (w: TestWatcher) => {
      const msgs = w.log.lines.map((l) => l['msg']);
      const changed = msgs.lastIndexOf('scrape shard members changed');
      return changed >= 0 && msgs.slice(changed + 1).some((m) => m === 'resynced endpoint shard' || m === 'published full state');
    };
    await waitFor(() => shardPublished(a) && shardPublished(b), { what: 'both shards published after the membership change' });
    await a.whenSettled();
    await b.whenSettled();
    const puts = { ...Object.fromEntries(endpoints.puts) };
    const start = totalScrapes();
    // The engines are scraped every 100 ms, each by one replica: 40 scrapes is about two seconds.
    await waitFor(() => totalScrapes() >= start + 40, { what: 'forty more scrapes' });
    await a.whenSettled();
    expect(Object.fromEntries(endpoints.puts)).toEqual(puts);
    expect(a.log.lines.filter((l) => l['msg'] === 'published full state')).toHaveLength(1);
  });

  it("writes a change once, from the owner of the record's shard only", async () => {
    const before = endpoints.puts.get('default.qwen.p0') ?? 0;
    write('decode');
    await waitFor(() => endpoints.get('default.qwen.p0')?.role === 'decode', { what: 'p0 decode' });
    await waitFor(() => b.reconciler.table.get('default.qwen.p0')?.role === 'decode', { what: 'the standby saw it too' });
    const start = totalScrapes();
    await waitFor(() => totalScrapes() >= start + 20, { what: 'more scrapes' });
    const writes = (endpoints.history.get('default.qwen.p0') ?? [])
      .slice(before)
      .map((r) => `${r.role} stale=${r.metrics.stale} ${r.metrics.lastError ?? ''}`);
    expect(writes).toEqual(['decode stale=false ']);
  });

  it('fails over: when the writer stops, the standby takes the lease and publishes the next change', async () => {
    await a.close();
    await waitFor(() => b.isLeader, { what: 'standby holds the lease' });
    write('prefill');
    await waitFor(() => endpoints.get('default.qwen.p0')?.role === 'prefill', { what: 'change published by the new writer' });
    expect(b.log.lines.some((l) => l['msg'] === 'holding the writer lease')).toBe(true);
  });
});
