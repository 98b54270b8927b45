import { prefixBlockHashes, type SchedulerReplica } from '@triad/scheduling';
import { schedulingRequest } from '@triad/scheduling/testing';
import type { SchedulingRequest } from '@triad/bus';
import { percentile, prng } from '../scheduler-cluster';

export interface DecisionTimes {
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
  readonly errors: number;
}

/**
 * In-process decision latency (ms) of `decisions` requests, each to one of `servers` picked at random (seeded):
 * 20 shared system prompts with varied turns, so prefix scoring has work to do. 2,000 decisions first warm the JIT.
 */
export function timeDecisions(local: SchedulerReplica, servers: readonly string[], decisions: number, now = Date.now()): DecisionTimes {
  const rand = prng(11);
  const hashes = Array.from({ length: 200 }, (_, i) =>
    prefixBlockHashes(
      'm',
      `You are assistant #${i % 20}. Follow the house rules carefully. `.repeat(12) +
        `question ${i}: ${'lorem '.repeat(Math.floor(rand() * 60))}`,
    ),
  );
  const requests: SchedulingRequest[] = Array.from({ length: 2000 }, (_, n) =>
    schedulingRequest({
      id: `bench-${n}`,
      modelServer: servers[Math.floor(rand() * servers.length)],
      model: 'm',
      prefixHashes: hashes[n % hashes.length],
    }),
  );
  for (let i = 0; i < 2000; i++) local.schedule(requests[i % requests.length], now);
  const latencies: number[] = [];
  let errors = 0;
  for (let i = 0; i < decisions; i++) {
    const started = process.hrtime.bigint();
    if (!local.schedule(requests[i % requests.length], now).ok) errors++;
    latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  latencies.sort((a, b) => a - b);
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    p999: percentile(latencies, 99.9),
    max: latencies.at(-1) ?? Number.NaN,
    errors,
  };
}
