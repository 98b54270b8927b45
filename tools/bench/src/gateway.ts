// Gateway benchmark: direct to a zero-profile engine-sim vs the gateway in aggregated, PD and EPD modes,
// non-stream and 64-token stream, at 1 and 32 connections (wrk). Run: npx tsx tools/bench/src/gateway.ts [--duration S]
// [--reference-proxy PATH] [--reference-proxy-newest PATH]: also vLLM's classic and newest reference EPD proxies in
// front of the same EPD sims (reference-proxy.ts, docs/reference-proxies.md).
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { runWrk, type WrkResult } from './lib/wrk';
import { markdownTable } from './lib/table';
import { measureEpdSequence } from './lib/epd-sequence';
import { readBaseline, regressions, runtimeMismatch, runtimeOf, writeBaseline, type Baseline } from './lib/baseline';
import { BENCH_MODEL, startGatewayStack } from './gateway-stack';
import { REFERENCE_HINT, referenceSummary, startReferenceProxies, type ReferenceProxies, type ReferenceScripts } from './reference-proxy';
import { TRIAD_BIN, parseToolArgs } from '@triad/testing';

const IMAGE = 'https://example.com/bench/cat.png';
const DEFAULT_BASELINE = resolve(__dirname, '../gateway-baseline.json');
/** Spread and direction of each kind of figure when a baseline is first written (then kept per figure). */
const FIGURE_KINDS = {
  'req/s': { spread: 0.15, better: 'higher' },
  'p50 ms': { spread: 0.2, better: 'lower' },
  'router CPU us/req': { spread: 0.1, better: 'lower' },
  'added ms': { spread: 0.25, better: 'lower' },
  'added ms over replayed stage bodies': { spread: 0.25, better: 'lower' },
} as const;
const TEXT = 'Describe the picture in one sentence, please.';

function chatBody(model: string, stream: boolean, image: boolean): string {
  const content = image
    ? [
        { type: 'text', text: TEXT },
        { type: 'image_url', image_url: { url: IMAGE } },
      ]
    : TEXT;
  return JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: stream ? 64 : 16, stream });
}

interface Case {
  readonly target: string;
  readonly url: string;
  readonly body: string;
  readonly stream: boolean;
  /** Which direct run this case is compared to. */
  readonly baseline: string;
  /** CPU seconds used so far by the router under test (none for direct runs). */
  readonly cpu?: () => number;
  /** The router is a process of its own (a reference proxy), not one of the stack's. */
  readonly outsideStack?: boolean;
}

async function main(): Promise<void> {
  const { values } = parseToolArgs({
    options: {
      duration: { type: 'string', default: '3' },
      warmup: { type: 'string', default: '1' },
      connections: { type: 'string', default: '1,32' },
      'reference-proxy': { type: 'string' },
      'reference-proxy-newest': { type: 'string' },
      // all: tracing (default sampler, spans to a discarding sink), a ModelRoute rateLimit, metrics, outlier
      // detection and the EC rewrite on, as deployed; none: tracing off and no rateLimit.
      features: { type: 'string', default: 'all' },
      // Run the routers (the gateways and the reference proxies) on these CPUs only (taskset -c); start the bench
      // itself under `taskset -c <the others>`.
      'gateway-cpus': { type: 'string' },
      // The committed figures this run is checked against (a warning per figure worse than its spread), and
      // --write-baseline to replace them with this run's (keeping each figure's spread).
      baseline: { type: 'string', default: DEFAULT_BASELINE },
      'write-baseline': { type: 'boolean', default: false },
      // Only the router cases whose target contains one of these (comma-separated, case-insensitive; e.g. `epd`):
      // the direct runs and the EPD baseline still run, the paced SSE and the regression guard do not.
      targets: { type: 'string' },
      // shared (default): both gateways (scheduler service, in-process) and the scheduler on one stack, each gateway
      // following the other's dispatch events as replicas do; service / in-process: one mode on a stack of its own, as
      // a one-replica deployment of that mode runs (in-process: no scheduler service). One mode's rows then carry no
      // second gateway's work.
      stack: { type: 'string', default: 'shared' },
    },
  });
  const stackMode = values.stack;
  if (stackMode !== 'shared' && stackMode !== 'service' && stackMode !== 'in-process')
    throw new Error(`--stack: expected shared, service or in-process, got '${stackMode}'`);
  if (stackMode !== 'shared' && values['write-baseline'] === true) throw new Error('--write-baseline: only with --stack shared');
  const inProcessOnly = stackMode === 'in-process';
  /** The rows of the gateway whose decisions come from the scheduler service, or in-process on an in-process-only stack. */
  const modeLabel = inProcessOnly ? ', in-process scheduling' : '';
  const only = values.targets
    ?.split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '');
  const features = values.features === 'none' ? 'none' : 'all';
  const classic = values['reference-proxy'] ?? process.env['TRIAD_BENCH_REFERENCE_PROXY'];
  const newest = values['reference-proxy-newest'] ?? process.env['TRIAD_BENCH_REFERENCE_PROXY_NEWEST'];
  const referenceScripts: ReferenceScripts = { ...(classic ? { classic } : {}), ...(newest ? { newest } : {}) };
  const durationSec = Number(values.duration);
  const warmupSec = Number(values.warmup);
  const connections = String(values.connections).split(',').map(Number);
  const stack = await startGatewayStack({
    inProcessGateway: stackMode === 'shared',
    ...(inProcessOnly ? { gatewayScheduling: 'in-process' as const, scheduler: false } : {}),
    features,
    ...(values['gateway-cpus'] !== undefined ? { gatewayCpus: values['gateway-cpus'] } : {}),
  });
  let reference: ReferenceProxies | undefined;
  try {
    const simUrl = (name: string) => stack.sims[name];
    const epdStages = { encode: simUrl('epd-e'), prefill: simUrl('epd-p'), decode: simUrl('epd-d') };
    if (classic || newest) reference = await startReferenceProxies(referenceScripts, epdStages, values['gateway-cpus']);
    const g = `${stack.gatewayUrl}/v1/chat/completions`;
    const inProcess = `${stack.inProcessGatewayUrl as string}/v1/chat/completions`;
    const direct = (sim: string) => `${stack.sims[sim]}/v1/chat/completions`;
    const cases: Case[] = [];
    const cpu = () => stack.cpuSeconds('gateway');
    const stackCpu = () => stack.processes.reduce((sum, name) => sum + stack.cpuSeconds(name), 0);
    for (const stream of [false, true]) {
      const kind = stream ? 'stream' : 'json';
      cases.push({
        target: 'direct (engine-sim)',
        url: direct('agg'),
        body: chatBody(BENCH_MODEL, stream, false),
        stream,
        baseline: `direct-${kind}`,
      });
      cases.push({
        target: `gateway aggregated${modeLabel}`,
        url: g,
        body: chatBody('agg', stream, false),
        stream,
        baseline: `direct-${kind}`,
        cpu,
      });
      cases.push({
        target: `gateway PD (vLLM nixl)${modeLabel}`,
        url: g,
        body: chatBody('pd', stream, false),
        stream,
        baseline: `direct-${kind}`,
        cpu,
      });
      cases.push({
        target: inProcessOnly ? 'gateway EPD, in-process scheduling' : 'gateway EPD (1 image + text)',
        url: g,
        body: chatBody('epd', stream, true),
        stream,
        baseline: `direct-${kind}`,
        cpu,
      });
      if (stackMode === 'shared')
        cases.push({
          target: 'gateway EPD, in-process scheduling',
          url: inProcess,
          body: chatBody('epd', stream, true),
          stream,
          baseline: `direct-${kind}`,
          cpu: () => stack.cpuSeconds('gateway-in-process'),
        });
      // The reference proxy sends the model name on to the engines, so it gets the engines' name.
      if (!stream)
        for (const r of reference?.targets ?? [])
          cases.push({
            target: r.target,
            url: r.url,
            body: chatBody(BENCH_MODEL, false, true),
            stream,
            baseline: 'direct-json',
            cpu: r.cpuSeconds,
            outsideStack: true,
          });
    }
    if (only !== undefined) {
      const kept = cases.filter((k) => k.cpu === undefined || only.some((t) => k.target.toLowerCase().includes(t)));
      cases.splice(0, cases.length, ...kept);
    }
    // Warm every path at 32 connections first: at 1 connection a few hundred requests leave V8 running the
    // gateway's code unoptimised (baseline tier plus background compiles), which measures the JIT, not the router.
    for (const k of cases) await runWrk({ url: k.url, body: k.body, connections: 32, durationSec: warmupSec + 1 });
    const rows: (string | number)[][] = [];
    const results = new Map<string, WrkResult>();
    /** Figures for the regression guard, named `target|body|conns|kind`. */
    const figures: Record<string, number> = {};
    /** CPU µs per request of each stack process, for the JSON EPD rows: where a request's stack CPU goes. */
    const byProcess: (string | number)[][] = [];
    for (const c of connections) {
      for (const k of cases) {
        // Gateway CPU per request is the figure a busy shared machine does not distort: wall-clock rates do.
        const cpuBefore = k.cpu?.() ?? NaN;
        // Every process of the stack (gateways, scheduler, nats-server, sims; not wrk): what a request costs the
        // machine, including the NATS deliveries it causes in processes other than the router.
        const stackBefore = stackCpu();
        const processBefore = stack.processes.map((name) => stack.cpuSeconds(name));
        const r = await runWrk({ url: k.url, body: k.body, connections: c, durationSec, warmupSec });
        const cpuUs = (((k.cpu?.() ?? NaN) - cpuBefore) * 1e6) / (r.requests * (1 + warmupSec / durationSec));
        // A reference proxy is not one of the stack's processes: its own CPU is added, so the rows compare.
        const stackUs = ((stackCpu() - stackBefore) * 1e6) / (r.requests * (1 + warmupSec / durationSec)) + (k.outsideStack ? cpuUs : 0);
        const key = `${k.target}|${k.stream}|${c}`;
        results.set(key, r);
        if (!k.stream && k.target.includes('EPD')) {
          const perRequest = (seconds: number) => Math.round((seconds * 1e6) / (r.requests * (1 + warmupSec / durationSec)));
          byProcess.push([
            k.target,
            String(c),
            ...stack.processes.map((name, i) => String(perRequest(stack.cpuSeconds(name) - processBefore[i]))),
          ]);
        }
        const base = results.get(`direct (engine-sim)|${k.stream}|${c}`);
        // Routers only: a direct run is the machine's figure, not the gateway's.
        if (k.cpu !== undefined) {
          const name = `${k.target}|${k.stream ? 'SSE' : 'JSON'}|${c}`;
          figures[`${name}|req/s`] = r.rps;
          figures[`${name}|p50 ms`] = r.p50ms;
          if (Number.isFinite(cpuUs)) figures[`${name}|router CPU us/req`] = cpuUs;
        }
        rows.push([
          k.target,
          k.stream ? 'SSE 64 tok' : 'JSON',
          String(c),
          r.rps,
          r.p50ms,
          r.p99ms,
          base ? `${((r.rps / base.rps) * 100).toFixed(0)}%` : '',
          Number.isFinite(cpuUs) ? String(Math.round(cpuUs)) : '–',
          String(Math.round(stackUs)),
          String(r.errors + r.non2xx),
        ]);
      }
    }
    // SSE from an engine that paces its tokens (20 ms each, as real decoders do): the relay's cost disappears
    // behind the engine's, which is how the "SSE at 95% of direct" goal is meant.
    if (only === undefined) {
      const pacedSec = Math.max(durationSec, 5);
      const pacedDirect = await runWrk({
        url: direct('paced'),
        body: chatBody(BENCH_MODEL, true, false),
        connections: 32,
        durationSec: pacedSec,
        warmupSec,
      });
      const pacedGateway = await runWrk({
        url: g,
        body: chatBody('paced', true, false),
        connections: 32,
        durationSec: pacedSec,
        warmupSec,
      });
      rows.push([
        'direct (paced engine-sim)',
        'SSE 64 tok',
        '32',
        pacedDirect.rps,
        pacedDirect.p50ms,
        pacedDirect.p99ms,
        '100%',
        '–',
        '–',
        String(pacedDirect.errors + pacedDirect.non2xx),
      ]);
      rows.push([
        'gateway aggregated (paced)',
        'SSE 64 tok',
        '32',
        pacedGateway.rps,
        pacedGateway.p50ms,
        pacedGateway.p99ms,
        `${((pacedGateway.rps / pacedDirect.rps) * 100).toFixed(0)}%`,
        '–',
        '–',
        String(pacedGateway.errors + pacedGateway.non2xx),
      ]);
    }
    // The old baseline of the added-latency figure, kept for comparison: each stage replayed by wrk at 1 connection
    // with a body that asks for less than the routers' (P gets the raw image and no encoder handles, so it pulls no
    // encoder output; D gets no kv_transfer_params, so it pulls no KV).
    const stageBodies = {
      encode: JSON.stringify({
        model: BENCH_MODEL,
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: IMAGE } }] }],
        max_tokens: 1,
        stream: false,
      }),
      prefill: JSON.stringify({
        model: BENCH_MODEL,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: TEXT },
              { type: 'image_url', image_url: { url: IMAGE } },
            ],
          },
        ],
        max_tokens: 1,
        stream: false,
        kv_transfer_params: {
          do_remote_decode: true,
          do_remote_prefill: false,
          remote_engine_id: null,
          remote_block_ids: null,
          remote_host: null,
          remote_port: null,
        },
      }),
      decode: JSON.stringify({
        model: BENCH_MODEL,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: TEXT },
              { type: 'image_url', image_url: { url: IMAGE } },
            ],
          },
        ],
        max_tokens: 16,
        stream: false,
      }),
    };
    const stage = async (sim: string, body: string) =>
      (await runWrk({ url: direct(sim), body, connections: 1, durationSec, warmupSec })).p50ms;
    const e = await stage('epd-e', stageBodies.encode);
    const p = await stage('epd-p', stageBodies.prefill);
    const d = await stage('epd-d', stageBodies.decode);
    const replayedSum = e + p + d;
    // The baseline: the same E→P→D the routers run, one request at a time from a client that costs nothing between
    // the stages (lib/epd-sequence.ts): each stage gets the routers' body, so P pulls the encoder output and D the KV.
    const sequence = await measureEpdSequence(
      epdStages,
      { model: BENCH_MODEL, text: TEXT, imageUrl: IMAGE, maxTokens: 16 },
      durationSec,
      warmupSec,
    );
    // wrk replaying the two stages whose bodies can be (an EC entry can be pulled again, a KV handle cannot): the same
    // stage work without the stages taking turns, printed next to the client's stage p50s as a check on them.
    const wrkEncode = await stage('epd-e', sequence.bodies.encode);
    const wrkPrefill = await stage('epd-p', sequence.bodies.prefill);
    process.stdout.write(
      `\nTriad on ${runtimeOf(TRIAD_BIN)} (${process.version}, ${TRIAD_BIN})\n` +
        `\n${markdownTable(['target', 'body', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'vs direct', 'router CPU µs/req', 'stack CPU µs/req', 'errors'], rows)}\n`,
    );
    // Processes not on a row's path still work for it: the other gateway and the scheduler follow every gateway's
    // dispatch events over NATS, as replicas of a deployment do.
    process.stdout.write(
      `\nStack CPU µs per JSON EPD request, by process:\n${markdownTable(['target', 'conns', ...stack.processes], byProcess)}\n`,
    );
    for (const [target, how] of [
      ['gateway EPD (1 image + text)', 'scheduler service, incl. the NATS scheduling round-trip'],
      ['gateway EPD, in-process scheduling', 'in-process scheduling'],
    ] as const) {
      const epd1 = results.get(`${target}|false|1`);
      if (epd1 === undefined) continue;
      const added = epd1.p50ms - sequence.totalP50ms;
      const addedOverReplayed = epd1.p50ms - replayedSum;
      figures[`${target}|JSON|1|added ms`] = added;
      figures[`${target}|JSON|1|added ms over replayed stage bodies`] = addedOverReplayed;
      process.stdout.write(
        `\n${target} at 1 connection: p50 ${epd1.p50ms.toFixed(3)} ms; the same E→P→D sent directly, one request at a time ` +
          `(routers' bodies, P and D pull) p50 ${sequence.totalP50ms.toFixed(3)} ms; gateway adds ${added.toFixed(3)} ms (${how}).\n` +
          `  old figure, over each stage's body without the hand-offs replayed by wrk (${replayedSum.toFixed(3)} ms): ` +
          `${addedOverReplayed.toFixed(3)} ms.\n`,
      );
    }
    process.stdout.write(
      `\nEPD baseline at 1 connection: the same E→P→D, ${sequence.requests} requests, p50 per request ${sequence.totalP50ms.toFixed(3)} ms ` +
        `(stage p50s encode ${sequence.encodeP50ms.toFixed(3)}, prefill ${sequence.prefillP50ms.toFixed(3)}, decode ${sequence.decodeP50ms.toFixed(3)}); ` +
        `wrk on the same encode and prefill bodies: ${wrkEncode.toFixed(3)} and ${wrkPrefill.toFixed(3)} ms. ` +
        `Old baseline, stage bodies without the hand-offs replayed by wrk: encode ${e.toFixed(3)} + prefill ${p.toFixed(3)} + decode ${d.toFixed(3)} = ${replayedSum.toFixed(3)} ms.\n`,
    );
    const many = Math.max(...connections);
    const at = (target: string, c: number) => results.get(`${target}|false|${c}`);
    const refs = (reference?.targets ?? []).map((r) => ({ target: r.target, many: at(r.target, many), one: at(r.target, 1) }));
    for (const [target, label] of [
      ['gateway EPD (1 image + text)', 'Triad EPD (scheduler service)'],
      ['gateway EPD, in-process scheduling', 'Triad EPD (in-process scheduling)'],
    ] as const) {
      process.stdout.write(
        `\n${referenceSummary({ many: at(target, many), one: at(target, 1) }, refs, many, { sameWork: sequence.totalP50ms, replayed: replayedSum }, label)}`,
      );
    }
    if (!reference) process.stdout.write(`\n${REFERENCE_HINT}\n`);
    if (only === undefined) guard(String(values.baseline), figures, values['write-baseline'] === true, features, durationSec);
    else process.stdout.write(`\nregression guard skipped: only the targets matching ${values.targets} ran\n`);
  } finally {
    await reference?.close();
    await stack.close();
  }
}

/** Prints a warning per figure worse than the committed baseline by more than its spread; or writes a new baseline. */
function guard(file: string, figures: Record<string, number>, write: boolean, features: string, durationSec: number): void {
  const previous: Baseline | undefined = existsSync(file) ? readBaseline(file) : undefined;
  const runtime = runtimeOf(TRIAD_BIN);
  if (write) {
    const source = `gateway.ts --duration ${durationSec} --features ${features}, ${process.version}, ${new Date().toISOString().slice(0, 10)}`;
    writeBaseline(file, source, figures, FIGURE_KINDS, previous, runtime);
    process.stdout.write(`\nbaseline written to ${file}\n`);
    return;
  }
  if (previous === undefined) {
    process.stdout.write(`\nno baseline at ${file} (--write-baseline writes one)\n`);
    return;
  }
  if (features !== 'all') {
    process.stdout.write(`\nregression guard skipped: the baseline is taken with every feature on (--features all)\n`);
    return;
  }
  const mismatch = runtimeMismatch(previous, runtime);
  if (mismatch !== undefined) {
    process.stdout.write(`\nregression guard skipped: ${mismatch} (--write-baseline takes one on this runtime)\n`);
    return;
  }
  const warnings = regressions(previous, figures);
  process.stdout.write(
    warnings.length === 0
      ? `\nregression guard: no figure worse than the baseline by more than its spread (${previous.source})\n`
      : `\n${warnings.join('\n')}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench gateway: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
