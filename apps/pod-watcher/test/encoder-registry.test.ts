import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';
import { freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import type { RegistryView } from '../src/registry/encoder-registry-sync';
import { startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(60_000);

/** The registry as the prefill's own listener lists it. */
const list = async (prefill: SimEngineHandle): Promise<string[]> => {
  const res = await fetch(`http://${prefill.host}:${prefill.encoderBootstrapPort}/list_encoder_urls`);
  const body = (await res.json()) as { encoder_urls: string[] };
  return [...body.encoder_urls].sort();
};

describe('SGLang EPD encoder registries', () => {
  let nats: NatsServerHandle;
  let dir: string;
  let file: string;
  let watcher: TestWatcher | undefined;
  const sims = new Map<string, SimEngineHandle>();
  let ports: { encodePort: number; prefillPort: number; decodePort: number };
  /** p2's registry listener: a fixed port announced by annotation (p1's is found through /server_info). */
  let p2RegistryPort: number;

  const encoderUrl = (n: number) => `http://127.0.5.${n}:${ports.encodePort}`;
  const objects = (encoders: number[], group2Encoders: number[] = []) => [
    modelServer('vl', { engine: 'SGLang', mode: 'epd', ports }),
    pod('p1', { app: 'vl', group: 'g1', role: 'prefill' }, { ip: '127.0.5.101' }),
    pod(
      'p2',
      { app: 'vl', group: 'g2', role: 'prefill' },
      {
        ip: '127.0.5.102',
        annotations: { 'triad.io/encoder-bootstrap-port': String(p2RegistryPort) },
      },
    ),
    pod('d1', { app: 'vl', group: 'g1', role: 'decode' }, { ip: '127.0.5.201' }),
    ...encoders.map((n) => pod(`e${n}`, { app: 'vl', group: 'g1', role: 'encode' }, { ip: `127.0.5.${n}` })),
    ...group2Encoders.map((n) => pod(`e${n}`, { app: 'vl', group: 'g2', role: 'encode' }, { ip: `127.0.5.${n}` })),
  ];
  const write = (docs: readonly object[]) => {
    writeFileSync(`${file}.tmp`, docs.map((d) => stringify(d)).join('---\n'));
    renameSync(`${file}.tmp`, file);
  };
  const start = async (name: string, opts: SimEngineOptions) => {
    const sim = await startSimEngine({ latencyProfile: 'zero', ...opts });
    sims.set(name, sim);
    return sim;
  };
  const stop = async (name: string) => {
    await sims.get(name)?.close();
    sims.delete(name);
  };
  const encoder = (n: number) => start(`e${n}`, { engine: 'sglang', role: 'encode', host: `127.0.5.${n}`, port: ports.encodePort });
  // SGLang's health check, fast: an encoder that stops answering is evicted within ~3 × 100 ms.
  const health = { encoderHealthCheckIntervalMs: 100, encoderHealthCheckTimeoutMs: 300 };
  const p1 = () =>
    start('p1', {
      engine: 'sglang',
      role: 'prefill',
      languageOnly: true,
      host: '127.0.5.101',
      port: ports.prefillPort,
      encoderBootstrapPort: 0,
      ...health,
    });
  const p2 = (encoderUrls: string[] = []) =>
    start('p2', {
      engine: 'sglang',
      role: 'prefill',
      languageOnly: true,
      host: '127.0.5.102',
      port: ports.prefillPort,
      encoderBootstrapPort: p2RegistryPort,
      encoderUrls,
      ...health,
    });
  const ops = (path: string) => fetch(`http://127.0.0.1:${watcher!.opsPort}${path}`);
  const debug = async () => ((await (await ops('/debug/encoder-registries')).json()) as { registries: RegistryView[] }).registries;
  const registryOf = async (sim: SimEngineHandle) =>
    (await debug()).find((r) => r.registryUrl === `http://${sim.host}:${sim.encoderBootstrapPort}`);
  const entry = async (sim: SimEngineHandle, url: string) => (await registryOf(sim))?.encoders.find((e) => e.url === url);
  const metric = async (pattern: RegExp) => Number(pattern.exec(await (await ops('/metrics')).text())?.[1] ?? 0);
  const lists = () => metric(/triad_podwatcher_encoder_registry_ops_total\{op="list",result="ok"\} (\d+)/);

  beforeAll(async () => {
    nats = await startNatsServer();
    ports = { encodePort: await freePort(), prefillPort: await freePort(), decodePort: await freePort() };
    p2RegistryPort = await freePort();
    await p1();
    // p2 starts with an encoder nobody asked for (as if self-registered); the watcher removes it.
    await p2(['http://10.9.9.9:1']);
    await start('d1', { engine: 'sglang', role: 'decode', host: '127.0.5.201', port: ports.decodePort });
    await encoder(1);
    await encoder(2);
    await encoder(3);
    dir = mkdtempSync(join(tmpdir(), 'triad-pw-epd-'));
    file = join(dir, 'cluster.yaml');
    write(objects([1, 2], [3]));
    watcher = await startTestWatcher({ nats: nats.url, source: `file:${file}`, registryIntervalMs: 150 });
  }, 60_000);

  afterAll(async () => {
    await watcher?.close();
    await Promise.all([...sims.values()].map((s) => s.close()));
    await nats?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("registers each prefill's group encoders on its registry listener (port: /server_info or annotation), removing others", async () => {
    await waitFor(async () => (await list(sims.get('p1')!)).join() === [encoderUrl(1), encoderUrl(2)].join(), {
      what: 'p1 registry = e1, e2',
    });
    await waitFor(async () => (await list(sims.get('p2')!)).join() === encoderUrl(3), { what: 'p2 registry = e3 only' });
    // Nothing went to the API port.
    expect(
      sims
        .get('p1')!
        .requests()
        .some((r) => r.path.includes('encoder_url')),
    ).toBe(false);
    const views = await debug();
    expect(views.map((r) => [r.registryUrl, r.portSource, r.reachable]).sort()).toEqual([
      [`http://127.0.5.101:${sims.get('p1')!.encoderBootstrapPort}`, 'server-info', true],
      [`http://127.0.5.102:${p2RegistryPort}`, 'annotation', true],
    ]);
    const noDrift = async () => (await debug()).every((r) => r.drift.missing.length === 0 && r.drift.extra.length === 0);
    await waitFor(noDrift, { what: 'no drift' });
  });

  it('leaves an encoder SGLang evicted for failing health alone, and sees SGLang revive it', async () => {
    const prefill = sims.get('p1')!;
    const registrations = prefill.counters()['registryRegistrations'];
    await stop('e2');
    await waitFor(async () => (await list(prefill)).join() === encoderUrl(1), { what: 'e2 evicted by SGLang' });
    expect(prefill.counters()['registryEvictions']).toBe(1);
    // Several passes later the watcher still has not put it back: SGLang owns its liveness.
    const passes = await lists();
    await waitFor(async () => (await lists()) >= passes + 4, { what: 'four more registry passes' });
    expect(await list(prefill)).toEqual([encoderUrl(1)]);
    expect(prefill.counters()['registryRegistrations']).toBe(registrations);
    expect(await entry(prefill, encoderUrl(2))).toMatchObject({ wanted: true, state: 'evicted', listed: false });
    expect((await registryOf(prefill))?.drift.missing).toEqual([encoderUrl(2)]);
    expect(await metric(/triad_podwatcher_encoder_registry_events_total\{event="evicted"\} (\d+)/)).toBe(1);
    await encoder(2);
    await waitFor(async () => (await list(prefill)).join() === [encoderUrl(1), encoderUrl(2)].join(), { what: 'e2 revived by SGLang' });
    expect(prefill.counters()['registryRevivals']).toBe(1);
    expect(prefill.counters()['registryRegistrations']).toBe(registrations);
    await waitFor(async () => (await entry(prefill, encoderUrl(2)))?.state === 'registered', { what: 'watcher sees the revival' });
  });

  it('registers a new encode pod once it is Ready and answers, and unregisters a deleted one', async () => {
    const prefill = sims.get('p1')!;
    write(objects([2, 4], [3]));
    await waitFor(async () => (await list(prefill)).join() === encoderUrl(2), { what: 'e1 unregistered' });
    // e4 is Ready in the cluster but its engine does not answer yet: pending, not registered.
    await waitFor(async () => (await entry(prefill, encoderUrl(4)))?.state === 'pending', { what: 'e4 pending' });
    expect(await list(prefill)).toEqual([encoderUrl(2)]);
    await encoder(4);
    await waitFor(async () => (await list(prefill)).join() === [encoderUrl(2), encoderUrl(4)].join(), { what: 'e4 registered' });
  });

  it('registers everything again when a prefill restarts and forgets its registry (same or a new listener port)', async () => {
    await stop('p2');
    const p2Registry = async () => (await debug()).find((r) => r.registryUrl.endsWith(`:${p2RegistryPort}`));
    await waitFor(async () => (await p2Registry())?.reachable === false, { what: 'p2 unreachable' });
    const again = await p2();
    await waitFor(async () => (await list(again)).join() === encoderUrl(3), { what: 'p2 registry rebuilt' });
    const oldPort = sims.get('p1')!.encoderBootstrapPort;
    await stop('p1');
    const restarted = await p1();
    expect(restarted.encoderBootstrapPort).not.toBe(oldPort);
    const rebuilt = [encoderUrl(2), encoderUrl(4)].join();
    await waitFor(async () => (await list(restarted)).join() === rebuilt, { what: 'p1 registry rebuilt on its new port' });
    expect(await metric(/triad_podwatcher_encoder_registry_events_total\{event="session_started"\} (\d+)/)).toBeGreaterThanOrEqual(4);
  });
});
