// Micro-benchmark: what one decision costs in-process, without an observer (the gateway's local fallback), with the
// scheduler app's observer (plugin timings for the metrics), with phase records collected, and through the app's
// handler with tracing off, with the decide span only, and with the decide span plus a span per phase (100 %
// sampling, discarding exporter). Variants run interleaved on the same index and request stream, so the load of a
// shared machine hits them alike; the table gives the median of the rounds.
// Run: npx tsx apps/scheduler/test/decide-cost.bench.ts [--sizes 100,1000] [--modes aggregated,pd,epd] [--rounds 7]
import { ExportResultCode } from '@opentelemetry/core';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { EndpointRecord, SchedulingRequest } from '@triad/bus';
import { EndpointIndex, InflightTracker, Scheduler, prefixBlockHashes } from '@triad/scheduling';
import { endpointRecord, modelServerRecord, schedulingRequest } from '@triad/scheduling/testing';
import { SeededRandom } from '@triad/testing/reliability';
import { setupTelemetry } from '@triad/telemetry';
import { SchedulerMetrics } from '../src/metrics';
import { DecideObserver } from '../src/service/decide-tracing';
import { handleScheduleBatch } from '../src/service/schedule-handler';

type Mode = 'aggregated' | 'pd' | 'epd';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

/** A seeded generator: the same cluster every run. */
function prng(seed: number): () => number {
  const random = new SeededRandom(seed);
  return () => random.next();
}

/** `size` endpoints of ModelServer default/ms in `mode` (PD groups of 9 for epd, 8 for pd), spread metrics. */
function buildIndex(mode: Mode, size: number, now: number): EndpointIndex {
  const rand = prng(size * 31 + mode.length);
  const roles: EndpointRecord['role'][] =
    mode === 'aggregated' ? ['aggregated'] : mode === 'pd' ? ['decode', 'prefill'] : ['decode', 'prefill', 'encode'];
  const perGroup = mode === 'pd' ? 8 : 9;
  const index = new EndpointIndex();
  index.applyModelServer({ op: 'PUT', value: modelServerRecord({ mode }) });
  for (let i = 0; i < size; i++) {
    const group = mode === 'aggregated' ? undefined : `g${Math.floor(i / perGroup)}`;
    index.applyEndpoint({
      op: 'PUT',
      value: endpointRecord({
        pod: `pod-${i}`,
        role: roles[i % roles.length],
        ...(group ? { group } : {}),
        ip: `10.0.${(i >> 8) & 255}.${i & 255}`,
        running: Math.floor(rand() * 16),
        waiting: Math.floor(rand() * 4),
        kv: Math.round(rand() * 90) / 100,
        ttftMs: 40 + rand() * 200,
        tpotMs: 8 + rand() * 30,
        scrapedAt: now,
      }),
    });
  }
  return index;
}

/** 20 system prompts with varied user turns (prefix hashes); two images per epd request. */
function requestStream(mode: Mode): () => SchedulingRequest {
  const rand = prng(7);
  const hashes = Array.from({ length: 200 }, (_, i) =>
    prefixBlockHashes(
      'm',
      `You are assistant #${i % 20}. Follow the house rules. `.repeat(12) + `question ${i}: ${'lorem '.repeat(Math.floor(rand() * 60))}`,
    ),
  );
  let n = 0;
  return () => {
    const i = n++;
    return schedulingRequest({
      id: `bench-${i}`,
      prefixHashes: hashes[i % hashes.length],
      mediaItems:
        mode === 'epd'
          ? [
              { index: 0, key: `u:img-${i % 50}`, modality: 'image' },
              { index: 1, key: `u:img-${(i * 7) % 300}`, modality: 'image' },
            ]
          : [],
    });
  };
}

const discard: SpanExporter = { export: (_spans, done) => done({ code: ExportResultCode.SUCCESS }), shutdown: async () => undefined };

interface Variant {
  readonly name: string;
  /** Tracing on (100 %, discarding exporter) while this variant runs. */
  readonly traced?: boolean;
  decide(request: SchedulingRequest): void;
}

function variants(mode: Mode, size: number, now: number): Variant[] {
  const index = buildIndex(mode, size, now);
  const tracker = new InflightTracker();
  const metrics = new SchedulerMetrics();
  const make = (observer?: DecideObserver) => new Scheduler({ index, tracker, instanceId: 'bench', ...(observer ? { observer } : {}) });
  const plain = make();
  const observed = new DecideObserver(metrics);
  const observedScheduler = make(observed);
  const collecting = new DecideObserver(metrics);
  const collectingScheduler = make(collecting);
  const handlerObserver = new DecideObserver(metrics);
  const handlerScheduler = make(handlerObserver);
  const spanOnlyScheduler = make(new DecideObserver(metrics));
  const batch = (request: SchedulingRequest) => ({ v: 1 as const, requests: [request] });
  return [
    { name: 'schedule(), no observer (gateway fallback)', decide: (r) => plain.schedule(r, now) },
    { name: 'schedule(), app observer, phases not asked for', decide: (r) => observedScheduler.schedule(r, now) },
    {
      name: 'schedule(), app observer, phases collected',
      decide: (r) => {
        collecting.collect(r);
        collectingScheduler.schedule(r, now);
      },
    },
    {
      name: 'handler, tracing off',
      decide: (r) => handleScheduleBatch(batch(r), { scheduler: handlerScheduler, index, metrics, observer: handlerObserver }),
    },
    {
      name: 'handler, traced: decide span only',
      traced: true,
      decide: (r) => handleScheduleBatch(batch(r), { scheduler: spanOnlyScheduler, index, metrics }),
    },
    {
      name: 'handler, traced: decide span + phase spans',
      traced: true,
      decide: (r) =>
        handleScheduleBatch(batch(r), { scheduler: handlerScheduler, index, metrics, observer: handlerObserver, tracePhases: true }),
    },
  ];
}

/** µs per decision over `n` decisions. */
function timeRun(v: Variant, next: () => SchedulingRequest, n: number): number {
  const requests = Array.from({ length: n }, next);
  const t0 = process.hrtime.bigint();
  for (const r of requests) v.decide(r);
  return Number(process.hrtime.bigint() - t0) / 1000 / n;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const sizes = flag('--sizes', '100,1000').split(',').map(Number);
  const modes = flag('--modes', 'aggregated,pd,epd').split(',') as Mode[];
  const rounds = Number(flag('--rounds', '7'));
  const rows: string[] = [];
  for (const size of sizes) {
    for (const mode of modes) {
      const now = Date.now();
      const vs = variants(mode, size, now);
      const next = requestStream(mode);
      const n = Math.max(200, Math.round(200_000 / size));
      const samples = vs.map(() => [] as number[]);
      for (let round = -1; round < rounds; round++) {
        // round -1 warms up the JIT
        for (const [i, v] of vs.entries()) {
          const telemetry = v.traced
            ? setupTelemetry({
                serviceName: 'triad-scheduler',
                version: 'bench',
                env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' },
                exporter: discard,
              })
            : undefined;
          const us = timeRun(v, next, n);
          await telemetry?.shutdown();
          if (round >= 0) samples[i].push(us);
        }
      }
      const base = median(samples[0]);
      for (const [i, v] of vs.entries()) {
        const us = median(samples[i]);
        const delta =
          i === 0 ? '–' : `${us - base >= 0 ? '+' : ''}${(us - base).toFixed(1)} µs (${(((us - base) / base) * 100).toFixed(0)} %)`;
        rows.push(`| ${size} | ${mode} | ${v.name} | ${us.toFixed(1)} | ${delta} |`);
      }
    }
  }
  process.stdout.write(
    ['| endpoints | mode | path | µs per decision (median) | vs no observer |', '|---:|---|---|---:|---:|', ...rows].join('\n') + '\n',
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
