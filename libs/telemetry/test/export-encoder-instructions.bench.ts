// Instructions per EPD request in TraceRequestEncoder.encode, counted by valgrind's callgrind (the figure a loaded,
// shared machine does not move), the encoder alone: the same question as gateway-instructions.ts's export share,
// without the rest of the gateway around it. The spans are the gateway's own (gateway-spans.ts through Triad's
// span recorder): request, route, schedule, encode, prefill, decode, with what changes from request to request
// (request and response ids, token counts, the scheduling batch size, two decode engines taken in turn). With
// `--connections 32` the spans of 32 requests end interleaved, stage by stage, as at 32 connections; with 1, request
// by request. Batches of 85 requests (510 spans: the batch processor exports at most 512). Counting is off through
// start-up and 200 warm-up batches, on for 40 batches; the main thread's count (no background compilation) over
// the requests.
// Run: npx tsx libs/telemetry/test/export-encoder-instructions.bench.ts [--connections 32|1]
import { randomUUID } from 'node:crypto';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { DecisionOrError } from '@triad/bus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  finishLegSpanStatus,
  finishRequestSpan,
  finishRouteSpan,
  finishScheduleSpan,
  startDecodeSpan,
  startEncodeSpan,
  startPrefillSpan,
  startRequestSpan,
  startRouteSpan,
  startScheduleSpan,
} from '../src/gateway-spans';
import { callgrindControl, countSelfUnderCallgrind } from '@triad/testing';
import { TraceRequestEncoder } from '../src/otlp/trace-request';
import type { Traced } from '../src/spans';
import { tracing } from '../src/state';
import { TriadTracer, type RecordedSpan } from '../src/tracer';

const REQUESTS_PER_BATCH = 85;
const WARMUP_BATCHES = 200;
const MEASURED_BATCHES = 40;

/** Endpoints as the gateway holds them: one object per engine, its strings flat (parsed from a message). */
function engine(stage: string, i: number): { ip: string; port: number; pod: string; key: string } {
  return JSON.parse(JSON.stringify({ ip: `127.0.1.${i + 1}`, port: 8000, pod: `epd-${stage}-${i}`, key: `default.epd.${stage}-${i}` })) as {
    ip: string;
    port: number;
    pod: string;
    key: string;
  };
}
const ENCODER = engine('encode', 0);
const PREFILL = engine('prefill', 0);
const DECODERS = [engine('decode', 0), engine('decode', 1)];

let served = 0;

/** `count` requests' spans, `connections` at a time: each stage's spans end together across the requests in flight. */
function requests(count: number, connections: number): void {
  for (let done = 0; done < count; done += connections) {
    const n = Math.min(connections, count - done);
    const inFlight = Array.from({ length: n }, () => ++served);
    const requestSpans = inFlight.map(() => startRequestSpan({ method: 'POST', route: '/v1/chat/completions', requestId: randomUUID() }));
    const stages: ((id: number, request: Traced) => void)[] = [
      (_id, request) => {
        const route = startRouteSpan(request, { model: 'epd' });
        finishRouteSpan(route, { namespace: 'default', modelServer: 'epd', modelRoute: 'epd' }, request);
      },
      (id, request) => {
        const schedule = startScheduleSpan(request, { namespace: 'default', modelServer: 'epd', mediaItems: 1 });
        const decoder = DECODERS[id % 2];
        const decision = {
          id: String(id),
          ok: true,
          mode: 'epd',
          attempts: [{ endpoint: decoder, prefill: PREFILL }],
          encoders: [{ item: 0, endpoint: ENCODER, alternates: [], affinity: id % 3 === 0 }],
          decidedBy: 'scheduler-0',
        } as unknown as DecisionOrError;
        finishScheduleSpan(schedule, decision, { batchSize: 1 + (id % 4) });
      },
      (id, request) => {
        const leg = { operation: 'chat', engine: 'vLLM', model: 'epd', maxTokens: 16, endpoint: ENCODER, mode: 'epd' };
        finishLegSpanStatus(startEncodeSpan(request, { ...leg, item: { index: 0, modality: 'image', affinity: id % 3 === 0 } }), 200);
      },
      (_id, request) => {
        const leg = { operation: 'chat', engine: 'vLLM', model: 'epd', maxTokens: 16, endpoint: PREFILL, mode: 'epd' };
        finishLegSpanStatus(startPrefillSpan(request, leg), 200);
      },
      (id, request) => {
        const leg = { operation: 'chat', engine: 'vLLM', model: 'epd', maxTokens: 16, endpoint: DECODERS[id % 2], mode: 'epd' };
        finishLegSpanStatus(startDecodeSpan(request, leg), 200);
      },
    ];
    for (const stage of stages) inFlight.forEach((id, i) => stage(id, requestSpans[i]));
    inFlight.forEach((id, i) =>
      finishRequestSpan(requestSpans[i], {
        statusCode: 200,
        requestModel: 'epd',
        operation: 'chat',
        response: {
          responseModel: 'epd',
          responseId: `chatcmpl-${randomUUID()}`,
          inputTokens: 40 + (id % 7),
          outputTokens: 16,
          finishReasons: ['length'],
        },
      }),
    );
  }
}

/** Under callgrind: records the spans, warms the encoder up, then encodes the measured batches with counting on. */
async function child(connections: number): Promise<void> {
  const ended: RecordedSpan[] = [];
  tracing.tracer = new TriadTracer({
    sample: () => true,
    sink: { onEnd: (span) => ended.push(span) },
    origin: {
      resource: resourceFromAttributes({ 'service.name': 'triad-gateway', 'service.version': 'bench', 'k8s.pod.name': 'gateway-0' }),
      instrumentationScope: { name: '@triad/telemetry', version: 'bench' },
    },
  });
  const batches = (count: number): ReadableSpan[][] =>
    Array.from({ length: count }, () => {
      ended.length = 0;
      requests(REQUESTS_PER_BATCH, connections);
      return ended.slice() as unknown as ReadableSpan[];
    });
  const encoder = new TraceRequestEncoder();
  for (const batch of batches(WARMUP_BATCHES)) encoder.encode(batch);
  const measured = batches(MEASURED_BATCHES);
  await callgrindControl(['--instr=on', String(process.pid)]);
  let bytes = 0;
  for (const batch of measured) bytes += encoder.encode(batch).length;
  await callgrindControl(['--dump', String(process.pid)]);
  process.stdout.write(`${bytes}\n`);
}

function main(): void {
  const at = process.argv.indexOf('--connections');
  const connections = at > 0 ? Number(process.argv[at + 1]) : 32;
  if (process.argv.includes('--child')) {
    void child(connections);
    return;
  }
  const { instructions, stdout } = countSelfUnderCallgrind(__filename, ['--connections', String(connections)]);
  const requestsCounted = REQUESTS_PER_BATCH * MEASURED_BATCHES;
  const bytes = Number(stdout.trim());
  process.stdout.write(
    `TraceRequestEncoder.encode, ${connections} connection(s): ${Math.round(instructions / requestsCounted)} instructions per EPD request ` +
      `(main thread; ${requestsCounted} requests, ${Math.round(bytes / requestsCounted)} bytes each)\n`,
  );
}

main();
