// Development profiler for the gateway benchmark stack: one case under wrk, CPU µs and read/write system calls
// (/proc/<pid>/io) per request of every process (gateway, scheduler, each engine-sim, nats-server), and optionally
// V8 CPU profiles of chosen children
// summarised by self time. Run:
//   npx tsx tools/bench/src/gateway-profile.ts [--model epd|pd|agg] [--stream] [--connections 32]
//     [--duration 10] [--warmup 2] [--prof gateway,scheduler,sims] [--top 30] [--strace gateway] [--perf gateway]
//     [--env TRIAD_X=1 (gateway environment, repeatable)] [--sim-processes one|each] [--nixl in-process|http] [--keep]
//     [--features all|none (tracing + ModelRoute rateLimit on, as gateway.ts; none: both off)]
//     [--scheduling service|in-process (which gateway takes the load; in-process starts both)]
// (--strace counts the named process's system calls per request during the run; it slows that process.
// --perf samples the named processes' CPU with Linux perf, JIT names included: V8's --cpu-prof samples wall
// time, so a process waiting for a core after a socket write shows that wait as `writev`.)
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectBus } from '@triad/bus/client';
import { markdownTable } from './lib/table';
import { ioSyscalls } from './lib/proc';
import { runWrk } from './lib/wrk';
import { startGatewayStack } from './gateway-stack';
import { parseToolArgs } from '@triad/testing';

const TEXT = 'Describe the picture in one sentence, please.';

function chatBody(model: string, stream: boolean): string {
  const content =
    model === 'epd'
      ? [
          { type: 'text', text: TEXT },
          { type: 'image_url', image_url: { url: 'https://example.com/bench/cat.png' } },
        ]
      : TEXT;
  return JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: stream ? 64 : 16, stream });
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  /** When sampling started, in µs of the monotonic clock (the one `process.hrtime` reads). */
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Now on the monotonic clock V8 stamps its CPU profiles with (`startTime`, in µs). */
function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/**
 * Self time per function and per file of a .cpuprofile, as shares of the busy samples (idle excluded) taken
 * between `fromUs` and `toUs` on the monotonic clock (the measured run, not start-up, warm-up or the stack's
 * shutdown). The profiled process starts seconds after this one, so the window is placed by clock, not by the
 * time since either process started.
 */
function summarise(file: string, top: number, fromUs: number, toUs: number): string {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const fn = new Map<string, number>();
  const files = new Map<string, number>();
  let total = 0;
  let at = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    const n = byId.get(p.samples[i]);
    const dt = p.timeDeltas[i] ?? 0;
    at += dt;
    if (n === undefined || at < fromUs || at > toUs || n.callFrame.functionName === '(idle)') continue;
    total += dt;
    const url = n.callFrame.url
      .replace(/^file:\/\//, '')
      .replace(/.*node_modules\//, 'nm:')
      .replace(/.*\/work\/main\//, '');
    const key = `${n.callFrame.functionName || '(anonymous)'} ${url}:${n.callFrame.lineNumber + 1}`;
    fn.set(key, (fn.get(key) ?? 0) + dt);
    const f = url === '' ? `(${n.callFrame.functionName})` : url;
    files.set(f, (files.get(f) ?? 0) + dt);
  }
  const rows = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, v]) => [((v / total) * 100).toFixed(1) + '%', k]);
  return `${markdownTable(['self', 'function'], rows(fn))}\n\n${markdownTable(['self', 'file'], rows(files))}`;
}

/** Median per-stage timings the gateway logged for requests that ended inside the measured window. */
function accessLogMedians(file: string, fromMs: number, toMs: number, t0: number): string {
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"kind":"access"'));
  const timings = lines
    .map((l) => JSON.parse(l) as { time?: string; timings_ms?: Record<string, number | null> })
    .filter((l) => l.time !== undefined && Date.parse(l.time) - t0 >= fromMs && Date.parse(l.time) - t0 <= toMs)
    .map((l) => l.timings_ms ?? {});
  const median = (k: string): string => {
    const v = timings.map((t) => t[k] ?? 0).sort((a, b) => a - b);
    return ((v[Math.floor(v.length / 2)] as number | undefined) ?? NaN).toFixed(3);
  };
  const keys = ['total', 'schedule', 'encode', 'prefill', 'decode'];
  return `gateway access log, medians of ${timings.length} requests (ms): ${keys.map((k) => `${k} ${median(k)}`).join(', ')}`;
}

/**
 * A subject's group for the per-request message count: the first three tokens, with reply inboxes as `_INBOX` and
 * JetStream API calls and KV keys by their operation and bucket (`$JS.API.DIRECT.GET.KV_x`, `$KV.x`).
 */
function subjectGroup(subject: string): string {
  if (subject.startsWith('_INBOX.')) return '_INBOX (replies)';
  const tokens = subject.split('.');
  if (tokens[0] === '$KV') return tokens.slice(0, 2).join('.');
  if (tokens[0] === '$JS' && tokens[1] === 'API') return tokens.slice(0, 5).join('.');
  if (tokens[0] === '$JS' && tokens[1] === 'ACK') return '$JS.ACK';
  return tokens.slice(0, 3).join('.');
}

/** Busy CPU seconds of the whole machine so far (all cores, /proc/stat: everything but idle and iowait). */
function machineBusySeconds(): number {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  return (total - (fields[3] ?? 0) - (fields[4] ?? 0) - (fields[7] ?? 0)) / 100;
}

/** CPU seconds the hypervisor gave to others (steal) and spent in soft interrupts, so far. */
function machineStealSoftirq(): [number, number] {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  return [(fields[7] ?? 0) / 100, (fields[6] ?? 0) / 100];
}

/** Sum and count of a Prometheus histogram (all label sets) from a /metrics text. */
async function histogram(url: string, name: string): Promise<[number, number]> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}_sum`)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.startsWith(`${name}_count`)) count += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return [sum, count];
}

async function main(): Promise<void> {
  const { values } = parseToolArgs({
    options: {
      model: { type: 'string', default: 'epd' },
      stream: { type: 'boolean', default: false },
      connections: { type: 'string', default: '32' },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      prof: { type: 'string', default: '' },
      top: { type: 'string', default: '30' },
      strace: { type: 'string', default: '' },
      perf: { type: 'string', default: '' },
      keep: { type: 'boolean', default: false },
      env: { type: 'string', multiple: true, default: [] },
      'sim-processes': { type: 'string', default: 'one' },
      nixl: { type: 'string', default: 'in-process' },
      'access-log': { type: 'boolean', default: false },
      repeat: { type: 'string', default: '0' },
      features: { type: 'string', default: 'all' },
      // service: the gateway asks the scheduler service; in-process: a second gateway deciding itself takes the
      // load (both run, as in gateway.ts, so each one's NATS messages wake the other).
      scheduling: { type: 'string', default: 'service' },
    },
  });
  // A model the stack does not serve would profile the gateway's 404 path, not a request's.
  if (!['epd', 'pd', 'agg'].includes(String(values.model)))
    throw new Error(`--model: expected epd, pd or agg, got '${String(values.model)}'`);
  const profDir = mkdtempSync(join(tmpdir(), 'triad-prof-'));
  const profiled = String(values.prof)
    .split(',')
    .filter((s) => s !== '');
  const nodeArgs: Record<string, string[]> = {};
  for (const name of profiled) nodeArgs[name] = ['--cpu-prof', `--cpu-prof-dir=${join(profDir, name)}`];
  const perfed = String(values.perf)
    .split(',')
    .filter((s) => s !== '');
  for (const name of perfed)
    nodeArgs[name] = [...(nodeArgs[name] ?? []), '--perf-basic-prof-only-functions', '--interpreted-frames-native-stack'];
  const t0 = Date.now();
  const gatewayEnv: NodeJS.ProcessEnv = Object.fromEntries(
    values.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const accessLog = values['access-log'] === true ? join(profDir, 'access.log') : undefined;
  if (accessLog !== undefined) gatewayEnv['TRIAD_LOG_LEVEL'] = 'info';
  const stack = await startGatewayStack({
    features: values.features === 'none' ? 'none' : 'all',
    nodeArgs,
    gatewayEnv,
    ...(accessLog !== undefined ? { gatewayLogFd: openSync(accessLog, 'w') } : {}),
    simProcesses: values['sim-processes'] === 'each' ? 'each' : 'one',
    nixlPull: values.nixl === 'http' ? 'http' : 'in-process',
    inProcessGateway: values.scheduling === 'in-process',
  });
  const connections = Number(values.connections);
  const durationSec = Number(values.duration);
  const url = `${values.scheduling === 'in-process' ? (stack.inProcessGatewayUrl as string) : stack.gatewayUrl}/v1/chat/completions`;
  const body = chatBody(String(values.model), values.stream === true);
  let summary = '';
  let window: number[];
  /** The measured run on the monotonic clock (µs), for the CPU profiles. */
  let windowUs: number[];
  try {
    await runWrk({ url, body, connections: 32, durationSec: Number(values.warmup) });
    // Extra measured windows on the same stack (before the main one): how much a run varies within one stack.
    for (let i = 0; i < Number(values.repeat); i++) {
      const cpu = stack.processes.map((n) => stack.cpuSeconds(n));
      const w = await runWrk({ url, body, connections, durationSec });
      const us = stack.processes.map((n, j) => `${n} ${Math.round(((stack.cpuSeconds(n) - cpu[j]) * 1e6) / w.requests)}`).join(', ');
      summary += `window ${i + 1}: ${w.rps.toFixed(0)} req/s, p50 ${w.p50ms.toFixed(2)} ms; CPU µs/req ${us}\n`;
    }
    const before = new Map(stack.processes.map((n) => [n, stack.cpuSeconds(n)]));
    const ioBefore = new Map(stack.processes.map((n) => [n, ioSyscalls(stack.pid(n))]));
    const batchBefore = await histogram(stack.gatewayOpsUrl, 'triad_gateway_schedule_batch_size');
    // Messages on the gateway's subjects during the run (this subscriber adds a little nats-server work).
    const counter = await connectBus({ servers: stack.natsUrl, name: 'bench-profile' });
    // Every subject (`>`), grouped by its first tokens (inboxes and KV keys collapsed): what crosses NATS per request.
    const counts = new Map<string, number>();
    counter.nc.subscribe('>', {
      callback: (_err, msg) => {
        const group = subjectGroup(msg.subject);
        counts.set(group, (counts.get(group) ?? 0) + 1);
      },
    });
    await counter.nc.flush();
    const from = Date.now() - t0;
    const fromUs = monotonicUs();
    const straced = String(values.strace);
    const tracer =
      straced === '' ? undefined : spawn('strace', ['-c', '-f', '-p', String(stack.pid(straced))], { stdio: ['ignore', 'ignore', 'pipe'] });
    let traceOut = '';
    tracer?.stderr.on('data', (d: Buffer) => (traceOut += d.toString()));
    const perfData = join(profDir, 'perf.data');
    const perf =
      perfed.length === 0
        ? undefined
        : spawn('perf', ['record', '-F', '999', '-g', '-o', perfData, '-p', perfed.map((n) => String(stack.pid(n))).join(',')], {
            stdio: 'ignore',
          });
    const busyBefore = machineBusySeconds();
    const [stealBefore, softBefore] = machineStealSoftirq();
    const wallBefore = Date.now();
    const r = await runWrk({ url, body, connections, durationSec });
    const busy = machineBusySeconds() - busyBefore;
    const [stealAfter, softAfter] = machineStealSoftirq();
    const wall = (Date.now() - wallBefore) / 1000;
    window = [from, Date.now() - t0];
    windowUs = [fromUs, monotonicUs()];
    if (perf !== undefined) {
      const exited = new Promise((res) => perf.once('exit', res));
      perf.kill('SIGINT');
      await exited;
      const report = spawn('perf', ['report', '-i', perfData, '--no-children', '--sort', 'pid,sym', '--stdio', '-g', 'none'], {
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      let text = '';
      report.stdout.on('data', (d: Buffer) => (text += d.toString()));
      await new Promise((res) => report.once('exit', res));
      const top = Number(values.top);
      summary += `perf (${perfed.join(', ')}):\n${text
        .split('\n')
        .filter((l) => /^\s+[\d.]+%/.test(l))
        .slice(0, top)
        .join('\n')}\n\n`;
    }
    if (tracer !== undefined) {
      const exited = new Promise((res) => tracer.once('exit', res));
      tracer.kill('SIGINT');
      await exited;
      const lines = traceOut.split('\n').filter((l) => /^\s*[\d.]+\s+[\d.]+\s+\d+\s+\d+/.test(l));
      const calls = lines.map((l) => l.trim().split(/\s+/)).map((f) => [f[f.length - 1], Number(f[3]) / r.requests] as const);
      const table = markdownTable(
        ['syscall', 'per request'],
        calls.filter(([, n]) => n >= 0.01).map(([n, c]) => [n, c.toFixed(2)]),
      );
      summary += `strace ${straced}: system calls per request (${r.requests} requests, slowed by strace)\n\n${table}\n\n`;
    }
    const perRequest = (now: number, then: number | undefined) => ((now - (then ?? NaN)) / r.requests).toFixed(2);
    const rows = stack.processes
      .map((n) => [n, ((stack.cpuSeconds(n) - (before.get(n) ?? 0)) * 1e6) / r.requests] as const)
      .filter(([, us]) => us >= 1)
      .map(([n, us]) => {
        const io = ioSyscalls(stack.pid(n));
        return [n, Math.round(us), perRequest(io.reads, ioBefore.get(n)?.reads), perRequest(io.writes, ioBefore.get(n)?.writes)];
      });
    const sum = rows.reduce((s, [, us]) => s + (us as number), 0);
    const stackSeconds = (sum * r.requests) / 1e6;
    summary +=
      `machine: ${((busy / wall) * 50).toFixed(0)}% busy of 2 cores; stack ${((stackSeconds / wall) * 50).toFixed(0)}%, wrk and ` +
      `everything else ${(((busy - stackSeconds) / wall) * 50).toFixed(0)}% (softirq ` +
      `${(((softAfter - softBefore) / wall) * 50).toFixed(0)}%); steal ${(((stealAfter - stealBefore) / wall) * 50).toFixed(0)}%\n`;
    await counter.close();
    summary += `NATS messages per request: ${[...counts.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([group, n]) => `${group} ${(n / r.requests).toFixed(2)}`)
      .join(', ')}\n`;
    const batchAfter = await histogram(stack.gatewayOpsUrl, 'triad_gateway_schedule_batch_size');
    const batches = batchAfter[1] - batchBefore[1];
    summary +=
      batches === 0
        ? 'scheduling: no NATS batches from the service-mode gateway\n'
        : `scheduling: ${batches} NATS batches, ${((batchAfter[0] - batchBefore[0]) / batches).toFixed(2)} requests per batch\n`;
    summary +=
      `${values.model} ${values.stream ? 'SSE' : 'JSON'} c=${connections}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50ms.toFixed(2)} ms, p99 ` +
      `${r.p99ms.toFixed(2)} ms, errors ${r.errors + r.non2xx}\n\n` +
      `${markdownTable(['process', 'CPU µs/req', 'read syscalls/req', 'write syscalls/req'], [...rows, ['all (excl. wrk)', sum, '', '']])}\n`;
  } finally {
    await stack.close();
  }
  process.stdout.write(summary);
  if (accessLog !== undefined) process.stdout.write(`\n${accessLogMedians(accessLog, window[0], window[1], t0)}\n`);
  for (const name of profiled) {
    const dir = join(profDir, name);
    for (const f of readdirSync(dir)) {
      const summary = summarise(join(dir, f), Number(values.top), windowUs[0], windowUs[1]);
      process.stdout.write(`\n### ${name} (${f})\n\n${summary}\n`);
    }
  }
  if (values.keep === true)
    process.stdout.write(
      `\nprofiles kept in ${profDir} (measured window ${window[0]}..${window[1]} ms after the bench started, ${windowUs[0]}..${windowUs[1]} µs on the profiles' clock)\n`,
    );
  else rmSync(profDir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  process.stderr.write(`gateway profile: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
