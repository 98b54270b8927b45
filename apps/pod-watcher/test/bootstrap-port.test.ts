import { createServer, type Server } from 'node:http';
import { Buckets, EndpointRecordSchema } from '@triad/bus';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import type { ObjectSource, SourceSink } from '../src/sources/source';
import { KvMirror, startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(30_000);

const SMG = 'sglang.ai/bootstrap-port';

class ListSource implements ObjectSource {
  constructor(private readonly objects: readonly object[]) {}
  async start(sink: SourceSink): Promise<void> {
    for (const o of this.objects) sink.upsert(o);
  }
  async close(): Promise<void> {}
}

/** An older SGLang build: only the deprecated `/get_server_info` (404 on `/server_info`). */
async function startLegacyEngine(host: string, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const json = { 'content-type': 'application/json' };
    if (req.url === '/metrics') {
      const text = 'sglang:num_running_reqs{tp_rank="0"} 0\nsglang:num_queue_reqs{tp_rank="0"} 0\n';
      res.writeHead(200, { 'content-type': 'text/plain' }).end(text);
    } else if (req.url === '/v1/models') res.writeHead(200, json).end('{"object":"list","data":[{"id":"sim-model"}]}');
    else if (req.url === '/get_server_info') {
      const info = { disaggregation_mode: 'prefill', disaggregation_bootstrap_port: 9555, dp_size: 3, tp_size: 1 };
      res.writeHead(200, json).end(JSON.stringify(info));
    } else res.writeHead(404, json).end('{"detail":"Not Found"}');
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return server;
}

describe('SGLang bootstrap port and DP size on endpoint records', () => {
  let nats: NatsServerHandle;
  let watcher: TestWatcher | undefined;
  let endpoints: KvMirror<typeof EndpointRecordSchema>;
  let legacy: Server;
  let live: SimEngineHandle;
  const sims: SimEngineHandle[] = [];
  let ports: { prefillPort: number; decodePort: number };
  const record = (ms: string, p: string) => endpoints.get(`default.${ms}.${p}`);
  const startLive = (dataParallel: number) =>
    startSimEngine({ engine: 'sglang', role: 'prefill', host: '127.0.8.1', port: ports.prefillPort, bootstrapPort: 0, dataParallel });

  beforeAll(async () => {
    nats = await startNatsServer();
    ports = { prefillPort: await freePort(), decodePort: await freePort() };
    live = await startLive(2);
    sims.push(await startSimEngine({ engine: 'sglang', role: 'decode', host: '127.0.8.8', port: ports.decodePort, dataParallel: 2 }));
    legacy = await startLegacyEngine('127.0.8.2', ports.prefillPort);
    const labels = (role: string) => ({ app: 'sg', group: 'g1', role });
    const objects = [
      modelServer('sg', { engine: 'SGLang', mode: 'pd', ports }),
      modelServer('sg-ms', { engine: 'SGLang', mode: 'pd', ports, bootstrapPort: 9005, matchLabels: { app: 'sg-ms' } }),
      // The engine's own /server_info wins over an annotation.
      pod('live', labels('prefill'), { ip: '127.0.8.1', annotations: { 'triad.io/bootstrap-port': '9999' } }),
      pod('legacy', labels('prefill'), { ip: '127.0.8.2' }),
      // No engine answers on these: the static configuration is all there is.
      pod('triad', labels('prefill'), { ip: '127.0.8.3', annotations: { 'triad.io/bootstrap-port': '9001', [SMG]: '9101' } }),
      pod('smg', labels('prefill'), { ip: '127.0.8.4', annotations: { [SMG]: '9002' } }),
      pod('smg-list', labels('prefill'), {
        ip: '127.0.8.5',
        annotations: { 'smg.ai/worker-ports': `${ports.prefillPort + 1},${ports.prefillPort}`, [SMG]: '9004,9003' },
      }),
      pod('spec', { app: 'sg-ms', group: 'g1', role: 'prefill' }, { ip: '127.0.8.6' }),
      pod('plain', labels('prefill'), { ip: '127.0.8.7' }),
      pod('dec', labels('decode'), { ip: '127.0.8.8' }),
    ];
    watcher = await startTestWatcher({ nats: nats.url, source: 'kube' }, new ListSource(objects));
    endpoints = await KvMirror.open(nats.url, Buckets.endpoints, EndpointRecordSchema);
  });

  afterAll(async () => {
    await endpoints?.close();
    await watcher?.close();
    await Promise.all([live, ...sims].map((s) => s?.close()));
    await new Promise<void>((resolve) => (legacy ? legacy.close(() => resolve()) : resolve()));
    await nats?.close();
  });

  it('publishes the port the prefill reports in /server_info (a non-default one), with dp_size', async () => {
    expect(live.bootstrapPort).not.toBe(8998);
    await waitFor(() => record('sg', 'live')?.bootstrapPort === live.bootstrapPort, { what: 'bootstrap port from /server_info' });
    expect(record('sg', 'live')).toMatchObject({ dpSize: 2 });
    await waitFor(() => record('sg', 'dec')?.dpSize === 2, { what: 'decode dp size' });
    expect(record('sg', 'dec')?.bootstrapPort).toBeUndefined();
  });

  it('falls back to /get_server_info on engines that do not serve /server_info', async () => {
    await waitFor(() => record('sg', 'legacy')?.bootstrapPort === 9555, { what: 'bootstrap port from /get_server_info' });
    expect(record('sg', 'legacy')?.dpSize).toBe(3);
  });

  it('reads the triad.io, then the sglang.ai annotation (one port or a list), then the ModelServer, then 8998', async () => {
    await waitFor(() => record('sg', 'plain') !== undefined && record('sg-ms', 'spec') !== undefined, { what: 'records' });
    expect(['triad', 'smg', 'smg-list', 'plain'].map((p) => record('sg', p)?.bootstrapPort)).toEqual([9001, 9002, 9003, 8998]);
    expect(record('sg-ms', 'spec')?.bootstrapPort).toBe(9005);
    expect(record('sg', 'plain')?.dpSize).toBeUndefined();
  });

  it('reads /server_info again when a prefill restarts, and publishes its new port', async () => {
    const before = live.bootstrapPort;
    await live.close();
    await waitFor(() => record('sg', 'live')?.metrics.stale === true, { what: 'prefill down' });
    live = await startLive(4);
    expect(live.bootstrapPort).not.toBe(before);
    await waitFor(() => record('sg', 'live')?.bootstrapPort === live.bootstrapPort, { what: 'new bootstrap port published' });
    expect(record('sg', 'live')?.dpSize).toBe(4);
  });
});
