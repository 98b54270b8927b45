// The tracer comparison of issue 17 counted in instructions instead of seconds: the gateway runs under valgrind's
// callgrind, which counts the instructions it executes whatever else the machine is doing, so the figure repeats on a
// shared, loaded machine where CPU time and throughput do not. Variants (same NodeSDK pipeline, 100 % sampling, spans
// to a sink that discards them): tracing off (the baseline), the SDK's tracer and Triad's span recorder
// (`TRIAD_TRACE_RECORDER`). Each variant is its own stack (gateway-stack.ts: nats-server, engine-sims, scheduler),
// measured one after the other: warm-up (instrumentation off), then the load window (instructions counted from zero:
// N EPD requests with one image, C at a time, until the last span export has arrived), over N. The window includes
// what runs beside the requests (timers, GC, JIT compilation on V8's threads); it is kept short by exporting every
// 500 ms (OTEL_BSP_SCHEDULE_DELAY, both traced variants) and averaged over many requests. A JIT runtime's count is
// not exact: repeat the run and compare the spread.
// Run: npx tsx tools/bench/src/tracer-instructions.ts [--requests 1500] [--warmup 1000] [--connections 32]
//   [--variants off,sdk,recorder]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor, parseToolArgs } from '@triad/testing';
import { callgrindControl, callgrindLauncher, dumpInstructions } from './lib/callgrind';
import { startDiscardingSink } from './lib/discarding-sink';
import { markdownTable } from './lib/table';
import { startGatewayStack, type GatewayStack } from './gateway-stack';

const BODY = JSON.stringify({
  model: 'epd',
  max_tokens: 16,
  stream: false,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Describe the picture in one sentence, please.' },
        { type: 'image_url', image_url: { url: 'https://example.com/bench/cat.png' } },
      ],
    },
  ],
});

interface Variant {
  readonly key: 'off' | 'sdk' | 'recorder';
  readonly label: string;
}
const VARIANTS: readonly Variant[] = [
  { key: 'off', label: 'tracing off' },
  { key: 'sdk', label: '100 %, SDK tracer' },
  { key: 'recorder', label: '100 %, Triad span recorder' },
];

/** `count` EPD requests, `connections` at a time; returns how many were answered 200. */
async function load(url: string, count: number, connections: number): Promise<number> {
  let next = 0;
  let ok = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next++;
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: BODY,
      });
      await res.arrayBuffer();
      if (res.status === 200) ok++;
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return ok;
}

interface Measurement {
  readonly variant: Variant;
  readonly ok: number;
  readonly requests: number;
  readonly exports: number;
  readonly loadSeconds: number;
  /** Every instruction of the load window over the requests. */
  readonly perRequest: number;
}

async function measure(v: Variant, opts: { requests: number; warmup: number; connections: number }): Promise<Measurement> {
  const sink = await startDiscardingSink();
  const dir = mkdtempSync(join(tmpdir(), 'triad-callgrind-'));
  const traced = v.key !== 'off';
  const tracing = traced
    ? {
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        OTEL_TRACES_SAMPLER: 'always_on',
        OTEL_BSP_SCHEDULE_DELAY: '500',
        TRIAD_TRACE_RECORDER: v.key,
      }
    : {};
  let stack: GatewayStack | undefined;
  try {
    stack = await startGatewayStack({
      gatewayEnv: tracing,
      // Instrumentation starts off: start-up and warm-up run uncounted; JIT-compiled code is re-translated (smc-check).
      gatewayLauncher: callgrindLauncher(dir),
      readyTimeoutMs: 600_000,
    });
    const pid = stack.pid('gateway') as number;
    if ((await load(stack.gatewayUrl, opts.warmup, opts.connections)) < opts.warmup) throw new Error(`${v.key}: warm-up requests failed`);
    callgrindControl(['--instr=on', String(pid)]);
    callgrindControl(['--zero', String(pid)]);
    const started = Date.now();
    const exportsBefore = sink.exports();
    const ok = await load(stack.gatewayUrl, opts.requests, opts.connections);
    const loadEnded = Date.now();
    // The batch processor exports on its schedule: count until an export has arrived after the last request and
    // none for 1.5 s more (three schedules; under valgrind they run late, not never).
    if (traced) {
      await waitFor(() => sink.lastAt() > loadEnded && Date.now() - sink.lastAt() > 1_500, {
        timeoutMs: 120_000,
        what: `${v.key}: last span export`,
      });
    }
    const total = dumpInstructions(pid, dir);
    const loadSeconds = (Date.now() - started) / 1000;
    return {
      variant: v,
      ok,
      requests: opts.requests,
      exports: sink.exports() - exportsBefore,
      loadSeconds,
      perRequest: total / opts.requests,
    };
  } finally {
    await stack?.close();
    await sink.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseToolArgs({
    options: {
      requests: { type: 'string', default: '1500' },
      warmup: { type: 'string', default: '1000' },
      connections: { type: 'string', default: '32' },
      variants: { type: 'string', default: 'off,sdk,recorder' },
    },
  });
  const opts = { requests: Number(values.requests), warmup: Number(values.warmup), connections: Number(values.connections) };
  const variants = String(values.variants)
    .split(',')
    .map((k) => {
      const v = VARIANTS.find((x) => x.key === k);
      if (!v) throw new Error(`unknown variant '${k}' (${VARIANTS.map((x) => x.key).join(', ')})`);
      return v;
    });
  if (variants[0]?.key !== 'off') throw new Error('the first variant must be off (the baseline)');
  const results: Measurement[] = [];
  for (const v of variants) {
    process.stderr.write(`measuring ${v.label}...\n`);
    results.push(await measure(v, opts));
  }
  const base = results[0].perRequest;
  process.stdout.write(
    `EPD, 1 image, ${opts.requests} requests at ${opts.connections} connections after ${opts.warmup} warm-up; gateway ` +
      'instructions counted by callgrind over the load window\n\n',
  );
  process.stdout.write(
    `${markdownTable(
      ['variant', 'ok', 'exports', 'load window (s)', 'gateway instructions per request', 'vs off'],
      results.map((r) => [
        r.variant.label,
        `${r.ok}/${r.requests}`,
        r.exports,
        r.loadSeconds,
        r.perRequest,
        r === results[0] ? 'baseline' : `+${((r.perRequest / base - 1) * 100).toFixed(1)} %`,
      ]),
    )}\n`,
  );
  const sdk = results.find((r) => r.variant.key === 'sdk');
  const own = results.find((r) => r.variant.key === 'recorder');
  if (sdk && own) {
    const points = ((sdk.perRequest - own.perRequest) / base) * 100;
    process.stdout.write(
      `\nThe recorder is ${points.toFixed(1)} points cheaper than the SDK's tracer (rule of issue 17: keep it at ≥ 5).\n`,
    );
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
