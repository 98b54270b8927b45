import { Buckets, EndpointRecordSchema } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  freePort,
  spawnTriad,
  startNatsServer,
  startSteadyLoad,
  waitFor,
  waitReady,
  type NatsServerHandle,
  type SteadyLoad,
  type TriadChild,
} from '@triad/testing';

// Bad manifests through the pod-watcher's file source (issue 16), end to end: `triad pod-watcher --source file:`
// and `triad gateway` as child processes, two engine-sims behind one ModelServer, and a steady load through the
// gateway. The file is replaced by broken versions one after another — emptied, truncated mid-document, broken
// YAML, binary noise, a ModelServer defined twice (the second copy broken), a Pod defined twice, pod addresses that
// are not IPs, a field of the wrong type — and each time the pod-watcher logs a warning and keeps the last good
// state: no request of the load fails and both pods stay in the pool with their addresses. A good version then
// applies as usual.

const MODEL = 'sim-model';
const IPS = ['127.0.61.1', '127.0.61.2'];

const SERVER = (port: number | string, selector = 'agg') => `apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: agg, namespace: default}
spec: {model: ${MODEL}, inferenceEngine: vLLM, workloadPort: {port: ${port}}, workloadSelector: {matchLabels: {app: ${selector}}}}`;
const ROUTE = `apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelRoute
metadata: {name: chat, namespace: default}
spec: {modelName: chat, rules: [{targetModels: [{modelServerName: agg}]}]}`;
const POD = (name: string, ip: string) => `apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default, labels: {app: agg}}
status: {phase: Running, podIP: "${ip}", conditions: [{type: Ready, status: "True"}]}`;

function manifests(
  port: number,
  pods: readonly [string, string][] = [
    ['agg-0', IPS[0]],
    ['agg-1', IPS[1]],
  ],
): string {
  return [SERVER(port), ROUTE, ...pods.map(([n, ip]) => POD(n, ip))].join('\n---\n');
}

describe('reliability: bad manifests keep the last good state while the gateway serves', () => {
  let nats: NatsServerHandle;
  let dir: string;
  let file: string;
  let watcher: TriadChild;
  let gateway: TriadChild;
  let url: string;
  let bus: Bus;
  let load: SteadyLoad | undefined;
  let port: number;
  const sims: SimEngineHandle[] = [];

  const warnings = (msg: string) =>
    watcher
      .output()
      .split('\n')
      .filter((l) => l.includes(`"msg":"${msg}`)).length;
  /** Replaces the file as editors and ConfigMap updates do: written elsewhere, renamed over. */
  const writeManifests = (text: string) => {
    writeFileSync(`${file}.tmp`, text);
    renameSync(`${file}.tmp`, file);
  };

  beforeAll(async () => {
    sims.push(await startSimEngine({ engine: 'vllm', role: 'both', host: IPS[0], model: MODEL, latencyProfile: 'zero' }));
    port = sims[0].port;
    sims.push(await startSimEngine({ engine: 'vllm', role: 'both', host: IPS[1], port, model: MODEL, latencyProfile: 'zero' }));
    nats = await startNatsServer();
    dir = mkdtempSync(join(tmpdir(), 'triad-bad-manifests-'));
    file = join(dir, 'cluster.yaml');
    writeManifests(manifests(port));
    const env = { TRIAD_LOG_LEVEL: 'warn' };
    const watcherOps = await freePort();
    watcher = spawnTriad(['pod-watcher', '--nats', nats.url, '--metrics-port', String(watcherOps), '--source', `file:${file}`], env);
    const [gatewayOps, gatewayPort] = [await freePort(), await freePort()];
    gateway = spawnTriad(
      [
        'gateway',
        '--nats',
        nats.url,
        '--host',
        '127.0.0.1',
        '--port',
        String(gatewayPort),
        '--metrics-port',
        String(gatewayOps),
        '--scheduling',
        'in-process',
      ],
      { ...env, TRIAD_ACCESS_LOG: 'false' },
    );
    url = `http://127.0.0.1:${gatewayPort}`;
    await waitReady(watcher, watcherOps, 'pod-watcher ready');
    await waitReady(gateway, gatewayOps, 'gateway ready');
    bus = await connectBus({ servers: nats.url, name: 'bad-manifests-test' });
    await waitFor(
      async () =>
        (await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'chat', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
        })
          .then((r) => r.status)
          .catch(() => 0)) === 200,
      { what: 'gateway serving chat', timeoutMs: 60_000 },
    );
  }, 120_000);
  afterAll(async () => {
    await load?.stop();
    await bus?.close();
    await gateway?.stop();
    await watcher?.stop();
    await nats?.close();
    await Promise.all(sims.map((s) => s.close()));
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  const poolIps = async () => {
    const kv = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
    const out: Record<string, string> = {};
    for (const key of (await kv.keys()).sort()) {
      const r = await kv.get(key);
      if (r?.ready === true) out[r.pod] = r.ip;
    }
    return out;
  };

  it('refuses or keeps every broken version, with a warning, and loses no request', async () => {
    load = startSteadyLoad({
      targets: [url],
      body: { model: 'chat', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] },
      concurrency: 2,
      paceMs: 10,
    });
    const good = manifests(port);
    const corruptions: [string, string, string][] = [
      ['emptied', '', 'source file refused; keeping the last state'],
      ['comments only', '# nothing yet\n---\n', 'source file refused; keeping the last state'],
      ['truncated mid-document', good.slice(0, good.lastIndexOf('podIP') + 10), 'source file refused; keeping the last state'],
      ['broken YAML', `${good}\n---\nkind: Pod\nmetadata: {name: x\n`, 'source file refused; keeping the last state'],
      [
        'binary noise',
        Buffer.from(Array.from({ length: 2048 }, (_, i) => (i * 131 + 7) % 256)).toString('latin1'),
        'source file refused; keeping the last state',
      ],
      ['a list instead of objects', '- a\n- b\n', 'source file refused; keeping the last state'],
      [
        'a ModelServer defined twice, the second copy broken',
        `${good}\n---\n${SERVER(port, 'nothing-matches')}`,
        'object defined more than once; keeping its last state until one definition remains',
      ],
      [
        'a Pod defined twice with two addresses',
        `${good}\n---\n${POD('agg-1', '127.0.61.9')}`,
        'object defined more than once; keeping its last state until one definition remains',
      ],
      [
        'pod addresses that are not IPs',
        manifests(port, [
          ['agg-0', '127.0.0.999'],
          ['agg-1', '::::'],
        ]),
        'rejected invalid object',
      ],
      ['a port of the wrong type', manifests(port).replace(`port: ${port}}`, 'port: "eighty"}'), 'rejected invalid object'],
    ];
    for (const [what, text, warning] of corruptions) {
      const before = warnings(warning);
      writeManifests(text);
      await waitFor(() => warnings(warning) > before, { what: `warning for ${what}`, timeoutMs: 15_000 });
      expect({ what, pool: await poolIps() }).toEqual({ what, pool: { 'agg-0': IPS[0], 'agg-1': IPS[1] } });
    }
    // A good version still applies: a third pod joins (the second sim's address again, under another name).
    writeManifests(
      manifests(port, [
        ['agg-0', IPS[0]],
        ['agg-1', IPS[1]],
        ['agg-2', IPS[1]],
      ]),
    );
    await waitFor(async () => (await poolIps())['agg-2'] === IPS[1], { what: 'the good version applied', timeoutMs: 15_000 });
    const report = await load.stop();
    load = undefined;
    expect(report.total.ok).toBeGreaterThan(0);
    expect({ failed: report.total.failed, failures: report.total.failures }).toEqual({ failed: 0, failures: {} });
  }, 120_000);
});
