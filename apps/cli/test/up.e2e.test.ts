import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { freePort, waitFor } from '@triad/testing';
import { TINY_PNG_DATA_URI } from '../src/commands/up/try-requests';
import { listeningAddresses } from './helpers/listening';
import { processesOf, stillAlive } from './helpers/processes';

// `triad up` as a user runs it: the real CLI, NATS, engine sims, pod-watcher, scheduler and gateway, on free
// ports with a small config in a temp dir. Requests go through the `openai` client; then a pod is removed from
// the YAML and the traffic must move to the other one; Ctrl-C must leave no process behind.

const cli = join(__dirname, '../bin/triad.js');
const dir = mkdtempSync(join(tmpdir(), 'triad-up-e2e-'));
const configPath = join(dir, 'cluster.yaml');
// A loopback block no other test uses, so the sims' addresses cannot clash with a parallel run.
const NET = '127.0.231';

interface PodDef {
  name: string;
  ip: string;
  labels: string;
  annotations?: string;
}

function writeConfig(port: number, pods: readonly PodDef[]): void {
  const objects = [
    `
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: tiny, namespace: default}
spec: {model: tiny-model, inferenceEngine: vLLM, workloadPort: {port: ${port}}, workloadSelector: {matchLabels: {app: tiny}}}`,
    `
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelRoute
metadata: {name: tiny, namespace: default}
spec: {modelName: tiny, rules: [{targetModels: [{modelServerName: tiny}]}]}`,
    `
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: tiny-vl, namespace: default}
spec:
  model: tiny-vl-model
  inferenceEngine: vLLM
  pipelineMode: epd
  kvConnector: {type: nixl}
  workloadPort: {port: ${port}}
  workloadSelector:
    matchLabels: {app: tiny-vl}
    pdGroup: {groupKey: group, encodeLabels: {role: encode}, prefillLabels: {role: prefill}, decodeLabels: {role: decode}}`,
    `
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelRoute
metadata: {name: tiny-vl, namespace: default}
spec: {modelName: tiny-vl, rules: [{targetModels: [{modelServerName: tiny-vl}]}]}`,
    ...pods.map(
      (p) => `
apiVersion: v1
kind: Pod
metadata: {name: ${p.name}, namespace: default, labels: ${p.labels}${p.annotations ? `, annotations: ${p.annotations}` : ''}}
status: {phase: Running, podIP: ${p.ip}, conditions: [{type: Ready, status: "True"}]}`,
    ),
  ];
  // Write then rename, as editors do, so the watchers never read half a file.
  const next = `${configPath}.next`;
  writeFileSync(next, objects.join('\n---'));
  renameSync(next, configPath);
}

// The aggregated pods publish KV events (their sims do, on port 5557 of their own loopback address).
const KV_EVENTS = '{triad.io/kv-events-endpoint: "tcp://*:5557", triad.io/kv-events-replay-endpoint: "tcp://*:5558"}';
const aggregatedPods: PodDef[] = [
  { name: 'tiny-0', ip: `${NET}.1`, labels: '{app: tiny}', annotations: KV_EVENTS },
  { name: 'tiny-1', ip: `${NET}.2`, labels: '{app: tiny}', annotations: KV_EVENTS },
];
const epdPods: PodDef[] = [
  { name: 'tiny-vl-encode-0', ip: `${NET}.11`, labels: '{app: tiny-vl, group: g1, role: encode}' },
  { name: 'tiny-vl-prefill-0', ip: `${NET}.12`, labels: '{app: tiny-vl, group: g1, role: prefill}' },
  { name: 'tiny-vl-decode-0', ip: `${NET}.13`, labels: '{app: tiny-vl, group: g1, role: decode}' },
];

/** Requests an engine sim has finished, from its Prometheus metrics (undefined once the sim is gone). */
async function servedBy(ip: string, port: number): Promise<number | undefined> {
  try {
    const text = await (await fetch(`http://${ip}:${port}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
    return [...text.matchAll(/^vllm:request_success_total\{[^}]*\} (\S+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
  } catch {
    return undefined;
  }
}

interface KvIndexPosition {
  pod?: string;
  epoch: string;
  seq: number;
  loading?: boolean;
}

/** Where a pod's KV-event source stands on an ops port's `/debug/kv-index` (kv-indexer: published; scheduler: applied). */
async function kvIndexPosition(port: number, pod: string): Promise<KvIndexPosition | undefined> {
  const body = (await (await fetch(`http://127.0.0.1:${port}/debug/kv-index`)).json()) as { sources: KvIndexPosition[] };
  return body.sources.find((s) => s.pod === `default/${pod}`);
}

let up: ChildProcess | undefined;
let output = '';
let simPort = 0;
let gatewayPort = 0;
let client: OpenAI;

beforeAll(async () => {
  simPort = await freePort();
  gatewayPort = await freePort();
  writeConfig(simPort, [...aggregatedPods, ...epdPods]);
  up = spawn(
    process.execPath,
    [cli, 'up', '--config', configPath, '--port', String(gatewayPort), '--nats', 'spawn', '--sim-latency', 'zero', '--raw-logs'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const collect = (d: Buffer) => {
    output += d.toString();
  };
  up.stdout?.on('data', collect);
  up.stderr?.on('data', collect);
  await waitFor(
    () => {
      if (up?.exitCode !== null) throw new Error(`triad up exited with ${up?.exitCode}:\n${output}`);
      return output.includes('Triad is ready in');
    },
    { timeoutMs: 150_000, intervalMs: 100, what: `triad up to be ready; output so far:\n${output}` },
  );
  client = new OpenAI({ baseURL: `http://127.0.0.1:${gatewayPort}/v1`, apiKey: 'not-needed', maxRetries: 0 });
}, 180_000);

afterAll(async () => {
  if (up && up.exitCode === null && up.signalCode === null) {
    // The watchdog stops whatever it leaves behind.
    up.kill('SIGKILL');
    await new Promise((r) => up?.once('exit', r));
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('triad up (end to end)', () => {
  it('prints the ready banner with the gateway, NATS and curl lines for text, image and stream', () => {
    expect(output).toContain(`gateway http://127.0.0.1:${gatewayPort}`);
    expect(output).toMatch(/nats {5}nats:\/\/127\.0\.0\.1:\d+ \(started by triad up/);
    expect(output).toContain('engines  5 simulated');
    // Ready means every engine was scraped once: the first requests are scored on metrics, not filtered for lack of them.
    expect(output).not.toContain('have no engine metrics yet');
    expect(output).toMatch(/# text \(tiny, vLLM aggregated\)\n {2}curl -s /);
    expect(output).toMatch(/# image \(tiny-vl, vLLM epd\)\n {2}curl -s .*image_url/);
    expect(output).toMatch(/# stream \(tiny-vl, vLLM epd\)\n {2}curl -N -s .*"stream":true/);
  });

  it('listens on loopback only by default: the gateway and every ops port, as the banner says', () => {
    expect(output).toContain('listen   127.0.0.1 only: this machine (--host 0.0.0.0 opens them to the network)');
    const opsLine = /^ {2}ops {6}(.*)$/m.exec(output)?.[1] ?? '';
    const ops = [...opsLine.matchAll(/([a-z-]+) :(\d+)/g)].map((m) => [m[1], Number(m[2])] as const);
    expect(ops.map(([name]) => name).sort()).toEqual(['gateway', 'kv-indexer', 'pod-watcher', 'scheduler', 'sim-pods']);
    const bound = [['gateway data', gatewayPort] as const, ...ops].map(([name, port]) => `${name}: ${listeningAddresses(port).join(' ')}`);
    expect(bound).toEqual([['gateway data', gatewayPort], ...ops].map(([name]) => `${name}: 127.0.0.1`));
  });

  it('answers a text request', async () => {
    const res = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 8 });
    expect(res.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('answers an image request through encode, prefill and decode', async () => {
    const served = () => Promise.all(epdPods.map((p) => servedBy(p.ip, simPort)));
    const before = await served();
    // Text well over the 512 uncached tokens a decode pod may prefill itself (per-request disaggregation), with a
    // fresh start so no pod holds its prefix: the prefill leg has to run.
    const text = `${Date.now()} What is in this image? Describe it against these notes: ${'a small red square on white. '.repeat(150)}`;
    const res = await client.chat.completions.create({
      model: 'tiny-vl',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text },
            { type: 'image_url', image_url: { url: TINY_PNG_DATA_URI } },
          ],
        },
      ],
      max_tokens: 8,
    });
    expect(res.choices[0]?.message.content?.length).toBeGreaterThan(0);
    // One request finished on each of the encoder, the prefill and the decode pod.
    expect(await served()).toEqual(before.map((n) => (n ?? 0) + 1));
  });

  it('streams an answer', async () => {
    const stream = await client.chat.completions.create({
      model: 'tiny-vl',
      messages: [{ role: 'user', content: 'Count to five' }],
      max_tokens: 8,
      stream: true,
    });
    const parts: string[] = [];
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) parts.push(choice.delta.content);
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    expect(parts.length).toBeGreaterThan(1);
    expect(finish).toBeTruthy();
  });

  it("routes a prompt to the pod whose engine holds its prefix, from the engines' KV events", async () => {
    const schedulerOps = Number(/scheduler :(\d+)/.exec(output)?.[1]);
    const indexerOps = Number(/kv-indexer :(\d+)/.exec(output)?.[1]);
    expect(indexerOps).toBeGreaterThan(0);
    const sentence = 'the router reads the blocks each engine reports and sends the prompt where its prefix already is';
    for (let i = 0; i < 4; i++) {
      // Put the prompt's blocks into one pod's cache behind the gateway's back: only its KV events can tell.
      const pod = aggregatedPods[i % 2];
      const prompt = `${i} ${sentence} `.repeat(8);
      const published = await waitFor(() => kvIndexPosition(indexerOps, pod.name), { what: `the kv-indexer to follow ${pod.name}` });
      const primed = await fetch(`http://${pod.ip}:${simPort}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny-model', prompt, max_tokens: 1 }),
      });
      expect(primed.status).toBe(200);
      // The indexer has published the priming batch once its seq moves; the scheduler has it once it applied up to there.
      const withPrime = await waitFor(
        async () => {
          const p = await kvIndexPosition(indexerOps, pod.name);
          return p && p.epoch === published.epoch && p.seq > published.seq ? p : undefined;
        },
        { what: `the kv-indexer to publish ${pod.name}'s KV events` },
      );
      await waitFor(
        async () => {
          const s = await kvIndexPosition(schedulerOps, pod.name);
          return s !== undefined && s.epoch === withPrime.epoch && s.seq >= withPrime.seq && s.loading !== true;
        },
        { what: `the scheduler to apply ${pod.name}'s KV events up to seq ${withPrime.seq}` },
      );
      const before = await servedBy(pod.ip, simPort);
      await client.completions.create({ model: 'tiny', prompt, max_tokens: 1 });
      expect(await servedBy(pod.ip, simPort)).toBe((before ?? 0) + 1);
    }
  }, 60_000);

  it('moves traffic off a pod removed from the YAML', async () => {
    const ask = () => client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'ping' }], max_tokens: 2 });
    for (let i = 0; i < 6; i++) await ask();
    const counts = async () => Promise.all(aggregatedPods.map((p) => servedBy(p.ip, simPort)));
    const initial = await counts();
    // Remove the pod that served the most, so "the traffic moved" cannot hold by accident.
    const busiest = (initial[1] ?? 0) > (initial[0] ?? 0) ? 1 : 0;
    const removed = aggregatedPods[busiest];
    const kept = aggregatedPods[1 - busiest];
    writeConfig(simPort, [kept, ...epdPods]);

    // Once the pool has followed the edit, every request lands on the kept pod.
    let streak = 0;
    let removedCount = initial[busiest] ?? 0;
    await waitFor(
      async () => {
        const keptBefore = await servedBy(kept.ip, simPort);
        await ask();
        const keptAfter = await servedBy(kept.ip, simPort);
        const removedNow = (await servedBy(removed.ip, simPort)) ?? removedCount;
        streak = keptAfter === (keptBefore ?? 0) + 1 && removedNow === removedCount ? streak + 1 : 0;
        removedCount = removedNow;
        return streak >= 5;
      },
      { timeoutMs: 30_000, intervalMs: 1, what: `five requests in a row served by ${kept.name} after ${removed.name} left the config` },
    );
    // ...and after its drain period the removed pod's sim is closed.
    const stopped = new RegExp(`engine sim stopped.*default/${removed.name}"|default/${removed.name}".*engine sim stopped`);
    await waitFor(() => stopped.test(output), { timeoutMs: 20_000, what: `the sim of ${removed.name} to stop` });
  }, 60_000);

  it('stops every process on Ctrl-C', async () => {
    const proc = up as ChildProcess;
    const processes = processesOf(proc.pid as number);
    expect(processes.length).toBeGreaterThanOrEqual(6);
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    proc.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(output).toContain('triad up: stopped; no service left running');
    expect(stillAlive(processes)).toEqual([]);
    // the gateway port is free again
    await new Promise<void>((resolve, reject) => {
      const probe = createServer().once('error', reject);
      probe.listen(gatewayPort, '0.0.0.0', () => probe.close(() => resolve()));
    });
  }, 60_000);
});
