import { Buckets, EndpointRecordSchema } from '@triad/bus';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import type { ObjectSource, SourceSink } from '../src/sources/source';
import { KvMirror, startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(30_000);

class ListSource implements ObjectSource {
  constructor(private readonly objects: readonly object[]) {}
  async start(sink: SourceSink): Promise<void> {
    for (const o of this.objects) sink.upsert(o);
  }
  async close(): Promise<void> {}
}

// vLLM prefills under `kvConnector: mooncake`: the watcher asks each one's bootstrap port `GET /query` to tell
// upstream vLLM's connector (concurrent flow, engine ids per DP rank) from vllm-ascend's (sequential, no server).
describe('vLLM Mooncake prefills: the bootstrap probe on endpoint records', () => {
  let nats: NatsServerHandle;
  let watcher: TestWatcher | undefined;
  let endpoints: KvMirror<typeof EndpointRecordSchema>;
  let upstream: SimEngineHandle;
  let ascend: SimEngineHandle;
  let decode: SimEngineHandle;
  let ports: { prefillPort: number; decodePort: number };
  let bootstrapPort: number;
  let silentPort: number;
  const record = (ms: string, p: string) => endpoints.get(`default.${ms}.${p}`);
  const startUpstream = (dataParallel: number) =>
    startSimEngine({
      engine: 'vllm',
      role: 'prefill',
      kvConnector: 'mooncake',
      host: '127.0.9.1',
      port: ports.prefillPort,
      bootstrapPort,
      dataParallel,
    });
  const engineIdsOf = async (sim: SimEngineHandle) => {
    const query = (await (await fetch(`http://${sim.host}:${sim.bootstrapPort}/query`)).json()) as Record<string, { engine_id: string }>;
    return Object.keys(query)
      .sort()
      .map((k) => query[k].engine_id);
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    ports = { prefillPort: await freePort(), decodePort: await freePort() };
    bootstrapPort = await freePort();
    silentPort = await freePort();
    upstream = await startUpstream(2);
    ascend = await startSimEngine({
      engine: 'vllm',
      role: 'prefill',
      kvConnector: 'mooncake-ascend',
      host: '127.0.9.2',
      port: ports.prefillPort,
    });
    decode = await startSimEngine({ engine: 'vllm', role: 'decode', kvConnector: 'mooncake', host: '127.0.9.3', port: ports.decodePort });
    const labels = (app: string, role: string) => ({ app, group: 'g1', role });
    const at = { 'triad.io/bootstrap-port': String(bootstrapPort) };
    const objects = [
      modelServer('mc', { ports, kvConnector: { type: 'mooncake' } }),
      modelServer('mc-ms', { ports, kvConnector: { type: 'mooncake' }, bootstrapPort, matchLabels: { app: 'mc-ms' } }),
      modelServer('mc-ascend', {
        ports,
        kvConnector: { type: 'mooncake', implementation: 'vllm-ascend' },
        matchLabels: { app: 'mc-ascend' },
      }),
      modelServer('nixl', { ports, kvConnector: { type: 'nixl' }, matchLabels: { app: 'nixl' } }),
      pod('up', labels('mc', 'prefill'), { ip: '127.0.9.1', annotations: at }),
      // vllm-ascend runs no HTTP server on its bootstrap port: nothing answers there.
      pod('asc', labels('mc', 'prefill'), { ip: '127.0.9.2', annotations: { 'triad.io/bootstrap-port': String(silentPort) } }),
      pod('dec', labels('mc', 'decode'), { ip: '127.0.9.3' }),
      pod('up-ms', labels('mc-ms', 'prefill'), { ip: '127.0.9.1' }),
      pod('up-pinned', labels('mc-ascend', 'prefill'), { ip: '127.0.9.1', annotations: at }),
      pod('up-nixl', labels('nixl', 'prefill'), { ip: '127.0.9.1', annotations: at }),
    ];
    watcher = await startTestWatcher({ nats: nats.url, source: 'kube', serverInfoIntervalMs: 300 }, new ListSource(objects));
    endpoints = await KvMirror.open(nats.url, Buckets.endpoints, EndpointRecordSchema);
  });

  afterAll(async () => {
    await endpoints?.close();
    await watcher?.close();
    await Promise.all([upstream, ascend, decode].map((s) => s?.close()));
    await nats?.close();
  });

  it("finds upstream vLLM's bootstrap server: concurrent flow, the engine id of each DP rank, on the annotated port", async () => {
    await waitFor(() => record('mc', 'up')?.mooncake !== undefined, { what: 'the probe of the upstream prefill' });
    expect(record('mc', 'up')).toMatchObject({
      ready: true,
      bootstrapPort,
      mooncake: { flow: 'concurrent', engineIds: await engineIdsOf(upstream), source: 'probe' },
    });
  });

  it("finds no bootstrap server on vllm-ascend's prefill: the sequential flow; decodes carry nothing of it", async () => {
    await waitFor(() => record('mc', 'asc')?.mooncake !== undefined, { what: 'the probe of the ascend prefill' });
    expect(record('mc', 'asc')).toMatchObject({
      ready: true,
      bootstrapPort: silentPort,
      mooncake: { flow: 'sequential', source: 'probe' },
    });
    await waitFor(() => record('mc', 'dec') !== undefined, { what: 'the decode record' });
    expect(record('mc', 'dec')?.mooncake).toBeUndefined();
    expect(record('mc', 'dec')?.bootstrapPort).toBeUndefined();
  });

  it("takes the ModelServer's bootstrapPort without an annotation, and its implementation over the probe", async () => {
    await waitFor(() => record('mc-ms', 'up-ms')?.mooncake !== undefined, { what: 'the probe on the ModelServer port' });
    expect(record('mc-ms', 'up-ms')).toMatchObject({ bootstrapPort, mooncake: { flow: 'concurrent' } });
    await waitFor(() => record('mc-ascend', 'up-pinned') !== undefined, { what: 'the pinned record' });
    expect(record('mc-ascend', 'up-pinned')).toMatchObject({ ready: true, mooncake: { flow: 'sequential', source: 'override' } });
    await waitFor(() => record('nixl', 'up-nixl') !== undefined, { what: 'the NIXL record' });
    expect(record('nixl', 'up-nixl')?.mooncake).toBeUndefined();
  });

  it('reads the engine ids again when the prefill restarts with new ones', async () => {
    const before = await engineIdsOf(upstream);
    await upstream.close();
    await waitFor(() => record('mc', 'up')?.metrics.stale === true, { what: 'the prefill down' });
    upstream = await startUpstream(3);
    const after = await engineIdsOf(upstream);
    expect(after).not.toEqual(before);
    await waitFor(() => JSON.stringify(record('mc', 'up')?.mooncake?.engineIds) === JSON.stringify(after), { what: 'the new engine ids' });
  });
});
