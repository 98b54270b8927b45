import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from '@triad/testing';
import { DASHBOARDS, dashboardJson } from './dashboards';
import { panelQueries, presenceQuery, queryVariables, substitute } from './expressions';
import { startPrometheus, type PrometheusHandle, type Sample } from './prometheus';
import { allRules, writeRulesFile } from './rules';
import { promtool, requireTool } from './tools';

// The monitoring assets against the real thing: `triad up` runs the local demo stack (infra/local/cluster.yaml:
// vLLM EPD, SGLang PD, vLLM aggregated, on simulated engines) while requests of every mode flow, a real
// Prometheus scrapes the gateway, scheduler, pod-watcher and kv-indexer under the job names the PodMonitors give them and
// evaluates the rules, and every rule expression and every dashboard query must return a finite value.

const ROOT = join(__dirname, '../../..');
const CLI = join(ROOT, 'apps/cli/bin/triad.js');
const dir = mkdtempSync(join(tmpdir(), 'triad-monitoring-'));
const IMAGE = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const IMAGE_PART = { type: 'image_url', image_url: { url: IMAGE } };

/** The demo config moved to loopback addresses and ports no other test uses. */
function writeStackConfig(workloadPort: number, bootstrapPort: number): string {
  const text = readFileSync(join(ROOT, 'infra/local/cluster.yaml'), 'utf8')
    .replace(/podIP: 127\.0\.(\d+)\./g, (_m, block: string) => `podIP: 127.0.${240 + Number(block)}.`)
    .replace(/port: 8000\b/g, `port: ${workloadPort}`)
    .replace(/bootstrapPort: 8998\b/g, `bootstrapPort: ${bootstrapPort}`);
  const path = join(dir, 'cluster.yaml');
  writeFileSync(path, text);
  return path;
}

/** One request of each kind the stack serves: EPD with an image, PD and aggregated, streamed and not. */
const REQUESTS: readonly Record<string, unknown>[] = [
  { model: 'qwen-vl', max_tokens: 6, messages: [{ role: 'user', content: [{ type: 'text', text: 'What is it?' }, IMAGE_PART] }] },
  {
    model: 'qwen-vl',
    max_tokens: 6,
    stream: true,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Describe' }, IMAGE_PART] }],
  },
  { model: 'llama-pd', max_tokens: 6, stream: true, messages: [{ role: 'user', content: 'Count to three' }] },
  { model: 'llama-pd', max_tokens: 6, messages: [{ role: 'user', content: 'Say hi' }] },
  { model: 'qwen-small', max_tokens: 6, stream: true, messages: [{ role: 'user', content: 'Hello there' }] },
  { model: 'qwen-small', max_tokens: 6, messages: [{ role: 'user', content: 'Hello' }] },
];

const finite = (samples: readonly Sample[]) => samples.some((s) => Number.isFinite(s.value));

let up: ChildProcess | undefined;
let output = '';
let prometheus: PrometheusHandle | undefined;
let gatewayUrl = '';
let trafficStopped = false;
/** Ops port of each service, from the banner's `ops` line. */
let ops = new Map<string, number>();
const JOBS = ['gateway', 'scheduler', 'pod-watcher', 'kv-indexer'];
let traffic: Promise<void> | undefined;
const answered = new Map<number, number>();

/** Sends the requests round-robin until stopped, a few in parallel, reading every answer to its end. */
async function sendTraffic(): Promise<void> {
  const worker = async (offset: number) => {
    for (let i = offset; !trafficStopped; i++) {
      const body = REQUESTS[i % REQUESTS.length];
      const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
      const res = await fetch(`${gatewayUrl}/v1/chat/completions`, init).catch(() => undefined);
      await res?.text();
      if (res) answered.set(res.status, (answered.get(res.status) ?? 0) + 1);
    }
  };
  await Promise.all([worker(0), worker(3)]);
}

beforeAll(async () => {
  requireTool('prometheus');
  requireTool('promtool');
  const [gatewayPort, workloadPort, bootstrapPort] = [await freePort(), await freePort(), await freePort()];
  const config = writeStackConfig(workloadPort, bootstrapPort);
  const args = [CLI, 'up', '--config', config, '--port', String(gatewayPort), '--nats', 'spawn', '--raw-logs'];
  up = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const collect = (d: Buffer) => {
    output = (output + d.toString()).slice(-200_000);
  };
  up.stdout?.on('data', collect);
  up.stderr?.on('data', collect);
  await waitFor(
    () => {
      if (up?.exitCode !== null) throw new Error(`triad up exited with ${up?.exitCode}:\n${output}`);
      return output.includes('Triad is ready in');
    },
    { timeoutMs: 150_000, intervalMs: 100, what: 'triad up to be ready' },
  );
  gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const opsLine = /^ {2}ops {6}(.*)$/m.exec(output)?.[1] ?? '';
  ops = new Map([...opsLine.matchAll(/([a-z-]+) :(\d+)/g)].map((m) => [m[1], Number(m[2])]));
  traffic = sendTraffic();
  prometheus = await startPrometheus({
    // The job names the PodMonitors give (the pods' app.kubernetes.io/component label).
    jobs: JOBS.map((job) => ({ job, targets: [`127.0.0.1:${ops.get(job) ?? 0}`] })),
    ruleFiles: [writeRulesFile(dir)],
  });
}, 180_000);

afterAll(async () => {
  trafficStopped = true;
  await traffic;
  await prometheus?.close();
  if (up && up.exitCode === null && up.signalCode === null) {
    const exited = new Promise((r) => up?.once('exit', r));
    up.kill('SIGINT');
    const timer = setTimeout(() => up?.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/**
 * Asks Prometheus each expression until all return a finite value or the time is up; returns those that never did.
 * Rates need two scrapes and recorded series a rule evaluation, hence the polling.
 */
async function unanswered(exprs: ReadonlyMap<string, () => Promise<boolean>>, timeoutMs: number): Promise<string[]> {
  const pending = new Map(exprs);
  const deadline = Date.now() + timeoutMs;
  while (pending.size > 0 && Date.now() < deadline) {
    for (const [name, check] of [...pending]) if (await check().catch(() => false)) pending.delete(name);
    if (pending.size > 0) await new Promise((r) => setTimeout(r, 1000));
  }
  return [...pending.keys()];
}

describe('monitoring assets against the running local stack', () => {
  it('Prometheus scrapes the gateway, scheduler, pod-watcher and kv-indexer under their PodMonitor job names', async () => {
    const p = prometheus as PrometheusHandle;
    await waitFor(async () => (await p.query('up == 1')).length === 4, { what: 'four targets up', timeoutMs: 30_000, intervalMs: 500 });
    expect((await p.query('up')).map((s) => s.labels['job']).sort()).toEqual(['gateway', 'kv-indexer', 'pod-watcher', 'scheduler']);
  }, 60_000);

  it("every service's /metrics passes `promtool check metrics`, with the standard process metrics under their own names", async () => {
    // The check itself flags a gauge named like a counter, so a clean result below means something.
    expect(promtool(['check', 'metrics'], undefined, '# HELP x_total x\n# TYPE x_total gauge\nx_total 1\n').status).not.toBe(0);
    for (const job of JOBS) {
      const text = await (await fetch(`http://127.0.0.1:${ops.get(job) ?? 0}/metrics`)).text();
      const r = promtool(['check', 'metrics'], undefined, text);
      expect(`${job}: ${r.status} ${r.output}`).toBe(`${job}: 0 `);
      for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes']) {
        expect(`${job}: ${new RegExp(`^${name} \\d`, 'm').test(text)}`).toBe(`${job}: true`);
      }
      // No service prefix on them: the job label tells the services apart.
      expect(text).not.toMatch(/^triad_[a-z_]*(process|nodejs)_/m);
    }
  }, 60_000);

  it('every recording and alerting rule expression, and every recorded series, returns data', async () => {
    const p = prometheus as PrometheusHandle;
    const checks = new Map<string, () => Promise<boolean>>();
    for (const rule of allRules()) {
      const expr = presenceQuery(rule.expr);
      checks.set(`${rule.record ?? rule.alert}: ${expr}`, async () => finite(await p.query(expr)));
      if (rule.record) checks.set(`recorded series ${rule.record}`, async () => finite(await p.query(rule.record as string)));
    }
    expect(checks.size).toBeGreaterThanOrEqual(40);
    expect(await unanswered(checks, 90_000)).toEqual([]);
    // Traffic of every kind was answered, so the figures above come from real requests.
    expect(answered.get(200) ?? 0).toBeGreaterThanOrEqual(REQUESTS.length);
  }, 120_000);

  it.each(Object.keys(DASHBOARDS))(
    'every panel and variable of %s returns data',
    async (file) => {
      const p = prometheus as PrometheusHandle;
      type Json = Parameters<typeof panelQueries>[0] & Parameters<typeof queryVariables>[0];
      const json = dashboardJson(DASHBOARDS[file]) as unknown as Json;
      // Variable values as Grafana would list them (each later variable per value of the earlier ones).
      let assignments: Record<string, string>[] = [{}];
      const checks = new Map<string, () => Promise<boolean>>();
      for (const v of queryVariables(json)) {
        const values = async (a: Record<string, string>) => p.labelValues(v.label, substitute(v.selector, a));
        const listed = async () => (await values(assignments[0] ?? {})).length > 0;
        await waitFor(listed, { what: `values of $${v.name}`, timeoutMs: 60_000, intervalMs: 1000 }).catch(() => undefined);
        const next: Record<string, string>[] = [];
        for (const a of assignments) for (const value of await values(a)) next.push({ ...a, [v.name]: value });
        checks.set(`variable ${v.name}: label_values(${v.selector}, ${v.label})`, async () => next.length > 0);
        if (next.length > 0) assignments = next;
      }
      for (const query of panelQueries(json)) {
        checks.set(`${query.panel}: ${query.expr}`, async () => {
          for (const a of assignments) if (finite(await p.query(substitute(query.expr, a)))) return true;
          return false;
        });
      }
      expect(await unanswered(checks, 90_000)).toEqual([]);
    },
    120_000,
  );
});
