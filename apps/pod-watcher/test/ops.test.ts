import { Buckets, EndpointRecordSchema } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import type { ObjectSource, SourceSink } from '../src/sources/source';
import { LeaseRecordSchema } from '../src/publish/writer-lease';
import { startPodWatcher } from '../src/watcher';
import { KvMirror, captureLog, testConfig, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(30_000);

/** A source whose first full state arrives only when the test says so. */
class GatedSource implements ObjectSource {
  #open: () => void = () => undefined;
  readonly #gate = new Promise<void>((resolve) => {
    this.#open = resolve;
  });
  sink: SourceSink | undefined;
  open(): void {
    this.#open();
  }
  async start(sink: SourceSink): Promise<void> {
    this.sink = sink;
    await this.#gate;
    sink.upsert(modelServer('qwen', { mode: 'aggregated' }));
    sink.upsert(pod('a', { app: 'qwen' }, { ip: '127.0.9.200' }));
    sink.upsert({ ...modelServer('broken'), spec: { inferenceEngine: 'TGI' } });
  }
  async close(): Promise<void> {}
}

describe('operational surface', () => {
  let nats: NatsServerHandle;
  const source = new GatedSource();
  let starting: Promise<TestWatcher> | undefined;
  let endpoints: KvMirror<typeof EndpointRecordSchema> | undefined;

  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    source.open();
    await endpoints?.close();
    await (await starting?.catch(() => undefined))?.close();
    await nats?.close();
  });

  const opsPortFromLog = (w: {
    log: {
      lines: Record<string, unknown>[];
    };
  }) => w.log.lines.find((l) => l['msg'] === 'pod-watcher starting')?.['opsPort'] as number | undefined;

  it('is live at once, ready only after the first full sync is published, and exports its metrics', async () => {
    // The watcher's start resolves after the source's first state, so readiness is watched on the ops port meanwhile.
    const log = captureLog();
    starting = startPodWatcher({
      config: testConfig({ nats: nats.url, source: 'kube' }),
      logger: log.logger,
      defaultMetrics: false,
      source,
    }).then((w) => Object.assign(w, { log }));
    const port = await waitFor(() => opsPortFromLog({ log }), { what: 'ops port' });
    const get = (path: string) => fetch(`http://127.0.0.1:${port}${path}`).then(async (r) => ({ status: r.status, text: await r.text() }));
    await waitFor(() => source.sink, { what: 'source started' });
    expect((await get('/healthz')).status).toBe(200);
    expect(await get('/readyz')).toEqual({ status: 503, text: expect.stringContaining('not ready') });

    source.open();
    const watcher = await starting;
    await waitFor(async () => (await get('/readyz')).status === 200, { what: 'ready' });
    endpoints = await KvMirror.open(nats.url, Buckets.endpoints, EndpointRecordSchema);
    expect(endpoints.keys()).toEqual(['default.qwen.a']);

    const metrics = (await get('/metrics')).text;
    expect(metrics).toContain('triad_podwatcher_objects{kind="ModelServer"} 1');
    expect(metrics).toContain('triad_podwatcher_objects{kind="Pod"} 1');
    expect(metrics).toContain('triad_podwatcher_invalid_objects{kind="ModelServer"} 1');
    expect(metrics).toContain('triad_podwatcher_endpoints{role="aggregated"} 1');
    expect(metrics).toContain('triad_podwatcher_leader 1');
    expect(metrics).toMatch(/triad_podwatcher_full_syncs_total\{result="ok"\} [1-9]/);
    // A change after the first sync is an incremental write, timed in the publish-latency histogram.
    source.sink?.upsert(pod('b', { app: 'qwen' }, { ip: '127.0.9.201' }));
    await waitFor(
      async () => {
        const text = (await get('/metrics')).text;
        return (
          /triad_podwatcher_scrape_errors_total\{what="metrics",reason="connect"\} [1-9]/.test(text) &&
          /triad_podwatcher_publish_latency_seconds_count\{bucket="triad_v1_endpoints"\} [1-9]/.test(text)
        );
      },
      { what: 'scrape error and publish latency counted' },
    );
    expect(watcher.ready).toBe(true);
  });

  it('shuts down gracefully: gives up the lease, stops serving', async () => {
    const watcher = await starting!;
    const port = watcher.opsPort;
    await watcher.close();
    const bus = await connectBus({ servers: nats.url, name: 'lease-check' });
    const lease = await bus.kv(Buckets.podWatcherLease, LeaseRecordSchema);
    expect(await lease.get('all')).toBeUndefined();
    await bus.close();
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });
});
