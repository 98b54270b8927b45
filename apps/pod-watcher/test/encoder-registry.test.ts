import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(30_000);

const list = async (prefill: SimEngineHandle): Promise<string[]> => {
  const body = (await (await fetch(`${prefill.url}/list_encoder_urls`)).json()) as { encoder_urls: string[] };
  return [...body.encoder_urls].sort();
};

describe('SGLang EPD encoder registries', () => {
  let nats: NatsServerHandle;
  let dir: string;
  let file: string;
  let starting: Promise<TestWatcher> | undefined;
  const sims = new Map<string, SimEngineHandle>();
  let ports: { encodePort: number; prefillPort: number; decodePort: number };

  const encoderUrl = (n: number) => `http://127.0.5.${n}:${ports.encodePort}`;
  const objects = (encoders: number[], group2Encoders: number[] = []) => [
    modelServer('vl', { engine: 'SGLang', mode: 'epd', ports }),
    pod('p1', { app: 'vl', group: 'g1', role: 'prefill' }, { ip: '127.0.5.101' }),
    pod('p2', { app: 'vl', group: 'g2', role: 'prefill' }, { ip: '127.0.5.102' }),
    pod('d1', { app: 'vl', group: 'g1', role: 'decode' }, { ip: '127.0.5.201' }),
    ...encoders.map((n) => pod(`e${n}`, { app: 'vl', group: 'g1', role: 'encode' }, { ip: `127.0.5.${n}` })),
    ...group2Encoders.map((n) => pod(`e${n}`, { app: 'vl', group: 'g2', role: 'encode' }, { ip: `127.0.5.${n}` })),
  ];
  const write = (docs: readonly object[]) => {
    writeFileSync(`${file}.tmp`, docs.map((d) => stringify(d)).join('---\n'));
    renameSync(`${file}.tmp`, file);
  };
  const encoder = async (n: number) => {
    const sim = await startSimEngine({
      engine: 'sglang', role: 'encode', host: `127.0.5.${n}`, port: ports.encodePort, latencyProfile: 'zero',
    });
    sims.set(`e${n}`, sim);
    return sim;
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    ports = { encodePort: await freePort(), prefillPort: await freePort(), decodePort: await freePort() };
    sims.set(
      'p1',
      await startSimEngine({
        engine: 'sglang', role: 'prefill', languageOnly: true, host: '127.0.5.101', port: ports.prefillPort, latencyProfile: 'zero',
      }),
    );
    // p2 starts with an encoder nobody asked for (as if self-registered); the reconcile must remove it.
    sims.set(
      'p2',
      await startSimEngine({
        engine: 'sglang', role: 'prefill', languageOnly: true, host: '127.0.5.102', port: ports.prefillPort, latencyProfile: 'zero',
        encoderUrls: ['http://10.9.9.9:1'],
      }),
    );
    sims.set(
      'd1', await startSimEngine({ engine: 'sglang', role: 'decode', host: '127.0.5.201', port: ports.decodePort, latencyProfile: 'zero' }),
    );
    await encoder(1);
    await encoder(2);
    await encoder(3);
    dir = mkdtempSync(join(tmpdir(), 'triad-pw-epd-'));
    file = join(dir, 'cluster.yaml');
    write(objects([1, 2], [3]));
    starting = startTestWatcher({ nats: nats.url, source: `file:${file}`, registryIntervalMs: 150 });
    await starting;
  }, 60_000);

  afterAll(async () => {
    await (await starting?.catch(() => undefined))?.close();
    await Promise.all([...sims.values()].map((s) => s.close()));
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers the encode pods of each prefill\'s own PD group and removes unknown ones', async () => {
    await waitFor(
      async () => (await list(sims.get('p1')!)).join() === [encoderUrl(1), encoderUrl(2)].join(), { what: 'p1 registry = e1, e2' },
    );
    await waitFor(async () => (await list(sims.get('p2')!)).join() === encoderUrl(3), { what: 'p2 registry = e3 only' });
  });

  it('unregisters a dead encoder (its scrapes fail) within a scrape interval or two, and registers it again when it is back', async () => {
    await sims.get('e2')!.close();
    sims.delete('e2');
    await waitFor(async () => (await list(sims.get('p1')!)).join() === encoderUrl(1), { what: 'e2 unregistered' });
    await encoder(2);
    await waitFor(
      async () => (await list(sims.get('p1')!)).join() === [encoderUrl(1), encoderUrl(2)].join(), { what: 'e2 registered again' },
    );
  });

  it('follows the pods: a new encode pod joins, a deleted one leaves', async () => {
    await encoder(4);
    write(objects([2, 4], [3]));
    await waitFor(async () => (await list(sims.get('p1')!)).join() === [encoderUrl(2), encoderUrl(4)].join(), { what: 'e1 out, e4 in' });
  });

  it('repairs a registry changed behind its back (a restarted prefill comes back empty)', async () => {
    await fetch(
      `${sims.get('p1')!.url}/unregister_encoder_url`,
      { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: encoderUrl(4) }) },
    );
    await waitFor(
      async () => (await list(sims.get('p1')!)).join() === [encoderUrl(2), encoderUrl(4)].join(),
      { what: 'repaired by the periodic reconcile' },
    );
  });
});
