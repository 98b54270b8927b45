import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';
import { freePort, spawnTriad, waitFor, waitReady, type TriadChild } from '@triad/testing';
import { startHarness, type Harness } from './support/harness';

// SGLang EPD and PD end to end as SGLang ships them: a real `triad pod-watcher` (file source) keeps the encoder
// registries and publishes bootstrap ports, the gateway (with its own scheduler) routes, engine-sims serve.

jest.setTimeout(90_000);

const API = 'networking.serving.volcano.sh/v1alpha1';
const MODEL = 'Qwen/Qwen2.5-VL-7B-Instruct';
const IMAGE = (n: number) => ({ type: 'image_url', image_url: { url: `https://example.com/${n}.png` } });

/**
 * A prefill as an older SGLang build (or a locked-down one) shows itself: `/server_info` and `/get_server_info`
 * answer 404, everything else is forwarded to the engine. The pod-watcher then has only the pod's annotations.
 */
async function startInfoHidingProxy(host: string, port: number, target: SimEngineHandle): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url === '/server_info' || req.url === '/get_server_info') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
      return;
    }
    const up = httpRequest({ host: target.host, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return server;
}

describe('gateway + pod-watcher, SGLang EPD and PD against engine-sims', () => {
  let h: Harness;
  let watcher: TriadChild | undefined;
  let dir: string;
  let file: string;
  const sims = new Map<string, SimEngineHandle>();
  const proxies: Server[] = [];
  let epdPorts: { encodePort: number; prefillPort: number; decodePort: number };
  let pdPorts: { prefillPort: number; decodePort: number };
  const bootstrap: Record<string, number> = {};

  const start = async (name: string, opts: SimEngineOptions) => {
    const sim = await startSimEngine({ latencyProfile: 'zero', model: MODEL, ...opts });
    sims.set(name, sim);
    return sim;
  };
  const stop = async (name: string) => {
    await sims.get(name)?.close();
    sims.delete(name);
  };
  const encoder = (n: number) => start(`e${n}`, { engine: 'sglang', role: 'encode', host: `127.0.16.${n}`, port: epdPorts.encodePort });
  const languageOnlyPrefill = () =>
    start('p1', {
      engine: 'sglang',
      role: 'prefill',
      languageOnly: true,
      visionTower: false,
      host: '127.0.16.101',
      port: epdPorts.prefillPort,
      bootstrapPort: 0,
      encoderBootstrapPort: 0,
      encoderHealthCheckIntervalMs: 100,
      encoderHealthCheckTimeoutMs: 300,
    });
  const registry = async (): Promise<string[]> => {
    const p1 = sims.get('p1')!;
    const res = await fetch(`http://${p1.host}:${p1.encoderBootstrapPort}/list_encoder_urls`);
    return ((await res.json()) as { encoder_urls: string[] }).encoder_urls.sort();
  };
  const encoderUrl = (n: number) => `http://127.0.16.${n}:${epdPorts.encodePort}`;
  const encodes = (n: number) =>
    sims
      .get(`e${n}`)
      ?.requests()
      .filter((r) => r.path === '/encode').length ?? 0;

  const doc = (kind: string, name: string, spec: object, metadata: object = {}) => ({
    apiVersion: API,
    kind,
    metadata: { name, namespace: 'default', ...metadata },
    spec,
  });
  const podDoc = (name: string, ip: string, labels: Record<string, string>, annotations?: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', labels, ...(annotations ? { annotations } : {}) },
    status: { phase: 'Running', podIP: ip, conditions: [{ type: 'Ready', status: 'True' }] },
  });
  const server = (name: string, mode: 'pd' | 'epd', matchLabels: Record<string, string>, workloadPort: object) =>
    doc('ModelServer', name, {
      model: MODEL,
      inferenceEngine: 'SGLang',
      pipelineMode: mode,
      workloadPort,
      workloadSelector: {
        matchLabels,
        pdGroup: {
          groupKey: 'group',
          prefillLabels: { role: 'prefill' },
          decodeLabels: { role: 'decode' },
          ...(mode === 'epd' ? { encodeLabels: { role: 'encode' } } : {}),
        },
      },
    });
  const route = (name: string) => doc('ModelRoute', name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name }] }] });

  const objects = (encoders: number[]) => [
    server('vl', 'epd', { app: 'vl' }, { port: 1, ...epdPorts }),
    route('vl'),
    podDoc('p1', '127.0.16.101', { app: 'vl', group: 'g1', role: 'prefill' }),
    podDoc('d1', '127.0.16.201', { app: 'vl', group: 'g1', role: 'decode' }),
    ...encoders.map((n) => podDoc(`e${n}`, `127.0.16.${n}`, { app: 'vl', group: 'g1', role: 'encode' })),
    // PD: one ModelServer per way of finding the bootstrap port, sharing one decode pod.
    ...['info', 'triad', 'smg'].flatMap((k) => [server(`pd-${k}`, 'pd', { [k]: 'yes' }, { port: 1, ...pdPorts }), route(`pd-${k}`)]),
    // The engine's /server_info wins over a (wrong) annotation.
    podDoc('pa', '127.0.17.1', { info: 'yes', group: 'g1', role: 'prefill' }, { 'triad.io/bootstrap-port': '1' }),
    podDoc('pb', '127.0.17.2', { triad: 'yes', group: 'g1', role: 'prefill' }, { 'triad.io/bootstrap-port': String(bootstrap['pb']) }),
    podDoc('pc', '127.0.17.3', { smg: 'yes', group: 'g1', role: 'prefill' }, { 'sglang.ai/bootstrap-port': String(bootstrap['pc']) }),
    podDoc('dd', '127.0.17.9', { info: 'yes', triad: 'yes', smg: 'yes', group: 'g1', role: 'decode' }),
  ];
  const write = (docs: readonly object[]) => {
    writeFileSync(`${file}.tmp`, docs.map((d) => JSON.stringify(d)).join('\n---\n'));
    renameSync(`${file}.tmp`, file);
  };

  const chat = (model: string, content: unknown, extra: object = {}) =>
    fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, max_tokens: 2, messages: [{ role: 'user', content }], ...extra }),
    });
  const withImages = (...n: number[]) => [{ type: 'text', text: 'describe' }, ...n.map(IMAGE)];

  beforeAll(async () => {
    h = await startHarness({ config: { scheduling: 'in-process' } });
    epdPorts = { encodePort: await freePort(), prefillPort: await freePort(), decodePort: await freePort() };
    pdPorts = { prefillPort: await freePort(), decodePort: await freePort() };
    await languageOnlyPrefill();
    await start('d1', { engine: 'sglang', role: 'decode', host: '127.0.16.201', port: epdPorts.decodePort });
    await encoder(1);
    await encoder(2);
    // PD prefills on bootstrap ports other than 8998.
    bootstrap['pa'] = await freePort();
    bootstrap['pb'] = await freePort();
    bootstrap['pc'] = await freePort();
    await start('pa', { engine: 'sglang', role: 'prefill', host: '127.0.17.1', port: pdPorts.prefillPort, bootstrapPort: bootstrap['pa'] });
    for (const [name, ip] of [
      ['pb', '127.0.17.2'],
      ['pc', '127.0.17.3'],
    ] as const) {
      const sim = await start(name, { engine: 'sglang', role: 'prefill', host: ip, bootstrapPort: bootstrap[name] });
      proxies.push(await startInfoHidingProxy(ip, pdPorts.prefillPort, sim));
    }
    await start('dd', { engine: 'sglang', role: 'decode', host: '127.0.17.9', port: pdPorts.decodePort });
    dir = mkdtempSync(join(tmpdir(), 'triad-sglang-stack-'));
    file = join(dir, 'cluster.yaml');
    write(objects([1, 2]));
    const opsPort = await freePort();
    watcher = spawnTriad(
      [
        'pod-watcher',
        '--nats',
        h.nats.url,
        '--source',
        `file:${file}`,
        '--metrics-port',
        String(opsPort),
        '--identity',
        'stack-test',
        '--scrape-interval',
        '100',
        '--registry-interval',
        '150',
        '--server-info-interval',
        '500',
      ],
      { TRIAD_LOG_LEVEL: 'warn' },
    );
    await waitReady(watcher, opsPort, 'triad pod-watcher ready');
    for (const model of ['vl', 'pd-info', 'pd-triad', 'pd-smg']) await h.waitForModel(model);
  });

  afterAll(async () => {
    await watcher?.stop();
    await h?.close();
    await Promise.all([...sims.values()].map((s) => s.close()));
    await Promise.all(proxies.map((p) => new Promise<void>((resolve) => p.close(() => resolve()))));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("EPD: the prefill's registry (its own listener, port from /server_info) holds the encoders, and they serve the items", async () => {
    await waitFor(async () => (await registry()).join() === [encoderUrl(1), encoderUrl(2)].join(), { what: 'registry = e1, e2' });
    const before = [encodes(1), encodes(2)];
    const res = await chat('vl', withImages(1, 2));
    expect([res.status, res.status === 200 ? '' : await res.text()]).toEqual([200, '']);
    // Two images over two registered encoders: one each; the prefill encoded nothing itself.
    expect([encodes(1) - before[0], encodes(2) - before[1]]).toEqual([1, 1]);
    expect(sims.get('p1')!.counters()['localEncodes'] ?? 0).toBe(0);
  });

  it('EPD: an encoder SGLang evicts for failing health leaves the work to the others; once back it serves again', async () => {
    await stop('e2');
    await waitFor(async () => (await registry()).join() === encoderUrl(1), { what: 'e2 evicted by SGLang' });
    const before = encodes(1);
    expect((await chat('vl', withImages(3, 4))).status).toBe(200);
    expect(encodes(1) - before).toBe(1);
    await encoder(2);
    await waitFor(async () => (await registry()).join() === [encoderUrl(1), encoderUrl(2)].join(), { what: 'e2 revived' });
    expect((await chat('vl', withImages(5, 6))).status).toBe(200);
    expect(encodes(2)).toBe(1);
  });

  it('EPD: a prefill restarting with an empty registry on a new port gets its encoders back', async () => {
    const oldPort = sims.get('p1')!.encoderBootstrapPort;
    await stop('p1');
    const restarted = await languageOnlyPrefill();
    expect(restarted.encoderBootstrapPort).not.toBe(oldPort);
    await waitFor(async () => (await registry()).join() === [encoderUrl(1), encoderUrl(2)].join(), { what: 'registry rebuilt' });
    const before = [encodes(1), encodes(2)];
    expect((await chat('vl', withImages(7, 8))).status).toBe(200);
    expect([encodes(1) - before[0], encodes(2) - before[1]]).toEqual([1, 1]);
  });

  it('EPD: a text-only request and a request while no encoder is registered are not refused by the scheduler', async () => {
    expect((await chat('vl', 'plain text')).status).toBe(200);
    write(objects([]));
    await waitFor(async () => (await registry()).length === 0, { what: 'encoders unregistered' });
    // The decision is still a P/D pair; the model here has no vision tower, so it is SGLang that fails the request
    // (its 500, as the gateway's 502 naming the stage), not the scheduler (503).
    const res = await chat('vl', withImages(9));
    expect(res.status).toBe(502);
    const message = ((await res.json()) as { error: { message: string } }).error.message;
    expect(message).toMatch(/^prefill failed with HTTP 500: No encoder is registered/);
    write(objects([1, 2]));
    await waitFor(async () => (await registry()).length === 2, { what: 'encoders registered again' });
  });

  it.each([
    ['pd-info', 'pa', "the engine's /server_info (over a wrong annotation)"],
    ['pd-triad', 'pb', 'the triad.io/bootstrap-port annotation'],
    ['pd-smg', 'pc', 'the sglang.ai/bootstrap-port annotation'],
  ])('PD %s: the decode reaches prefill %s on the bootstrap port from %s', async (model, prefill) => {
    const dd = sims.get('dd')!;
    const matched = dd.counters()['roomsMatched'] ?? 0;
    const res = await chat(model, 'hello', { stream: true });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain('"error"');
    expect(text.trim().endsWith('data: [DONE]')).toBe(true);
    const sent = sims
      .get(prefill)!
      .requests()
      .filter((r) => r.path === '/v1/chat/completions')
      .at(-1)?.body as Record<string, unknown>;
    expect(sent['bootstrap_port']).toBe(bootstrap[prefill]);
    expect(dd.counters()['roomsMatched']).toBe(matched + 1);
  });
});
