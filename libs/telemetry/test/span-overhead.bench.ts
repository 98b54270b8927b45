// Micro-benchmark: the tracing work of one EPD request (request, route, schedule, 2 encodes, prefill, decode spans,
// trace headers for 4 engine legs and the NATS batch) with tracing off, sampled out, recorded into a discarding
// exporter, and recorded through the real OTLP exporter to a receiver in another process.
// Run: npx tsx libs/telemetry/test/span-overhead.bench.ts   (prints a Markdown table)
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ExportResultCode } from '@opentelemetry/core';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { injectBatchTraceHeaders, setupTelemetry } from '../src/index';
import {
  finishLegSpan,
  finishRequestSpan,
  finishRouteSpan,
  finishScheduleSpan,
  recordFirstToken,
  startDecodeSpan,
  startEncodeSpan,
  startPrefillSpan,
  startRequestSpan,
  startRouteSpan,
  startScheduleSpan,
} from '../src/gateway-spans';
import { injectTraceHeaders } from '../src/propagation';
import { epdDecision, leg } from './fixtures';

const incoming = { 'content-type': 'application/json', 'user-agent': 'bench', 'x-request-id': 'r' };

function oneRequest(): void {
  const req = startRequestSpan({ method: 'POST', route: '/v1/chat/completions', headers: incoming, requestId: 'r' });
  const route = startRouteSpan(req, { model: 'qwen-vl' });
  finishRouteSpan(route, { namespace: 'default', modelServer: 'qwen-vl', mode: 'epd' }, req);
  const schedule = startScheduleSpan(req, { namespace: 'default', modelServer: 'qwen-vl', mediaItems: 2 });
  injectBatchTraceHeaders([schedule]);
  finishScheduleSpan(schedule, epdDecision, { batchSize: 1 });
  const encodes = epdDecision.encoders.map((e) =>
    startEncodeSpan(req, { ...leg(e.endpoint), item: { index: e.item, modality: 'image', affinity: e.affinity } }),
  );
  for (const e of encodes) {
    injectTraceHeaders(e, { 'content-type': 'application/json' });
    finishLegSpan(e, { statusCode: 200 });
  }
  const prefill = startPrefillSpan(req, leg(epdDecision.attempts[0].prefill!, { maxTokens: 1 }));
  injectTraceHeaders(prefill, { 'content-type': 'application/json' });
  finishLegSpan(prefill, { statusCode: 200, inputTokens: 800 });
  const decode = startDecodeSpan(req, leg(epdDecision.attempts[0].endpoint, { maxTokens: 256, stream: true }));
  injectTraceHeaders(decode, { 'content-type': 'application/json' });
  recordFirstToken(decode);
  finishLegSpan(decode, { statusCode: 200, inputTokens: 800, outputTokens: 40, finishReasons: ['stop'] });
  finishRequestSpan(req, { statusCode: 200, requestModel: 'qwen-vl', operation: 'chat' });
}

const discard: SpanExporter = { export: (_spans, done) => done({ code: ExportResultCode.SUCCESS }), shutdown: async () => undefined };

/** µs per request over `n` requests after a warm-up; the best of 5 runs (least disturbed by GC and the OS). */
function measure(n: number): number {
  for (let i = 0; i < 2000; i++) oneRequest();
  let best = Infinity;
  for (let run = 0; run < 5; run++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) oneRequest();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1000 / n);
  }
  return best;
}

async function startReceiverProcess(): Promise<{ url: string; stop: () => Promise<void> }> {
  const root = join(__dirname, '../../..');
  const child = spawn(process.execPath, [join(root, 'apps/cli/bin/triad.js'), 'trace', 'serve', '--port', '0', '--max-spans', '10000'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`receiver exited ${code}`)));
  });
  return {
    url,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function main(): Promise<void> {
  const n = 20_000;
  const rows: [string, number][] = [];
  rows.push(['tracing off (no endpoint)', measure(n)]);
  let t = setupTelemetry({
    serviceName: 'triad-gateway',
    version: 'bench',
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_TRACES_SAMPLER: 'always_off' },
    exporter: discard,
  });
  rows.push(['on, sampled out (always_off)', measure(n)]);
  await t.shutdown();
  t = setupTelemetry({
    serviceName: 'triad-gateway',
    version: 'bench',
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
    },
    exporter: discard,
  });
  rows.push(['on, 10% (parentbased_traceidratio), discarding exporter', measure(n)]);
  await t.shutdown();
  // Triad's span recorder (the default) and the SDK's tracer (TRIAD_TRACE_RECORDER=sdk), in turns.
  const recorders = [
    ['recorder', "Triad's recorder"],
    ['sdk', "the SDK's tracer"],
  ] as const;
  for (const [recorder, label] of recorders) {
    t = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 'bench',
      exporter: discard,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', TRIAD_TRACE_RECORDER: recorder },
    });
    rows.push([`on, 100% recorded by ${label}, discarding exporter`, measure(n)]);
    await t.shutdown();
  }
  const receiver = await startReceiverProcess();
  for (const [recorder, label] of recorders) {
    t = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 'bench',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_MAX_QUEUE_SIZE: '100000', TRIAD_TRACE_RECORDER: recorder },
    });
    // Export runs on this thread too (protobuf serialization, HTTP): count this process's CPU time through the final
    // flush (wall time would include the receiver's own decoding, which runs in the other process).
    const m = 20_000;
    for (let i = 0; i < 2000; i++) oneRequest();
    await t.forceFlush();
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < m; i++) oneRequest();
    await t.forceFlush();
    const cpu = process.cpuUsage(cpu0);
    rows.push([
      `on, 100% recorded by ${label}, OTLP http/protobuf to \`triad trace serve\` (CPU incl. export)`,
      (cpu.user + cpu.system) / m,
    ]);
    await t.shutdown();
  }
  await receiver.stop();
  const base = rows[0][1];
  process.stdout.write('| tracing | µs per EPD request (7 spans, 5 injects) | vs off |\n|---|---:|---:|\n');
  for (const [name, us] of rows) {
    process.stdout.write(`| ${name} | ${us.toFixed(2)} | ${us === base ? '–' : `+${(us - base).toFixed(2)} µs`} |\n`);
  }
}

void main();
