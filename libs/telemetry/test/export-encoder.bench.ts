// Micro-benchmark: what serializing the span export costs per EPD request (the 7 spans of fixtures.epdRequest, as the
// gateway records them: request, route, schedule, 2 encodes, prefill, decode), the SDK's ProtobufTraceSerializer
// against Triad's TraceRequestEncoder, on batches of 511 spans (73 requests; the batch processor exports at most 512).
// Both must write the same bytes (checked first); the figure is the best of 7 runs, in µs per request.
// Run: npx tsx libs/telemetry/test/export-encoder.bench.ts [--recorder recorder|sdk]
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { TraceRequestEncoder } from '../src/otlp/trace-request';
import { setupTelemetry } from '../src/setup';
import { epdRequest } from './fixtures';

const REQUESTS_PER_BATCH = 73;
const BATCHES = 200;

async function recordBatch(recorder: string): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter();
  const telemetry = setupTelemetry({
    serviceName: 'triad-gateway',
    version: 'bench',
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      OTEL_BSP_MAX_QUEUE_SIZE: '100000',
      TRIAD_TRACE_RECORDER: recorder,
      POD_NAME: 'gateway-0',
      POD_NAMESPACE: 'triad-system',
    },
    exporter: memory,
  });
  for (let i = 0; i < REQUESTS_PER_BATCH; i++) epdRequest();
  await telemetry.forceFlush();
  const spans = memory.getFinishedSpans();
  await telemetry.shutdown();
  return spans;
}

/** µs per request serializing `spans` with `serialize`: best of 7 runs of BATCHES batches, after a warm-up run. */
function measure(spans: ReadableSpan[], serialize: (spans: ReadableSpan[]) => Uint8Array | undefined): number {
  let best = Infinity;
  for (let run = 0; run < 8; run++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < BATCHES; i++) serialize(spans);
    const us = Number(process.hrtime.bigint() - t0) / 1000 / (BATCHES * REQUESTS_PER_BATCH);
    if (run > 0) best = Math.min(best, us);
  }
  return best;
}

async function main(): Promise<void> {
  const recorderArg = process.argv.indexOf('--recorder');
  const recorder = recorderArg > 0 ? process.argv[recorderArg + 1] : 'recorder';
  const spans = await recordBatch(recorder);
  const encoder = new TraceRequestEncoder();
  const sdkBytes = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
  if (!Buffer.from(encoder.encode(spans)).equals(sdkBytes)) throw new Error('the encoders disagree: not measuring');
  // Alternate the two so that drift (frequency, neighbours) touches both alike.
  const sdk: number[] = [];
  const ours: number[] = [];
  for (let round = 0; round < 3; round++) {
    sdk.push(measure(spans, (s) => ProtobufTraceSerializer.serializeRequest(s)));
    ours.push(measure(spans, (s) => encoder.encode(s)));
  }
  const sdkUs = Math.min(...sdk);
  const oursUs = Math.min(...ours);
  process.stdout.write(
    `spans ${spans.length} (${REQUESTS_PER_BATCH} EPD requests, TRIAD_TRACE_RECORDER=${recorder}), ${sdkBytes.length} bytes per export\n` +
      '| serializer | µs per request | \n|---|---:|\n' +
      `| ProtobufTraceSerializer (SDK) | ${sdkUs.toFixed(2)} |\n` +
      `| TraceRequestEncoder (Triad) | ${oursUs.toFixed(2)} |\n` +
      `ratio SDK / Triad: ${(sdkUs / oursUs).toFixed(2)}×\n`,
  );
}

void main();
