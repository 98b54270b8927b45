// Over-NATS load generators for the scheduler benchmark: 32 clients asking one decision per message, and the same
// 32 clients coalesced by a gateway-style batcher (everything queued while a batch is in flight goes in the next
// one; no timer).
import { ScheduleBatchReplySchema, ScheduleBatchSchema, Subjects, type SchedulingRequest } from '@triad/bus';
import type { Bus } from '@triad/bus/client';
import { percentile } from './scheduler-cluster';

export interface LoadResult {
  readonly p50ms: number;
  readonly p99ms: number;
  readonly perSecond: number;
  readonly decisions: number;
  readonly errors: number;
}

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

function summarize(latencies: number[], elapsedMs: number, errors: number): LoadResult {
  latencies.sort((a, b) => a - b);
  return {
    p50ms: percentile(latencies, 50),
    p99ms: percentile(latencies, 99),
    perSecond: (latencies.length / elapsedMs) * 1000,
    decisions: latencies.length,
    errors,
  };
}

async function ask(bus: Bus, requests: SchedulingRequest[]): Promise<number> {
  const reply = await bus.request(Subjects.schedule, ScheduleBatchSchema, { v: 1, requests }, ScheduleBatchReplySchema, {
    timeoutMs: 10_000,
  });
  if (!('decisions' in reply)) return requests.length;
  return reply.decisions.filter((d) => !d.ok).length;
}

/** `clients` loops, each sending one request per message and waiting for its reply. */
export async function loadSingle(bus: Bus, next: () => SchedulingRequest, clients: number, durationMs: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  const start = nowMs();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (nowMs() < end) {
        const t0 = nowMs();
        errors += await ask(bus, [next()]);
        latencies.push(nowMs() - t0);
      }
    }),
  );
  return summarize(latencies, nowMs() - start, errors);
}

/** `clients` loops whose requests a batcher coalesces: at most one batch in flight, the rest queue for the next. */
export async function loadBatched(bus: Bus, next: () => SchedulingRequest, clients: number, durationMs: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  const queue: { request: SchedulingRequest; t0: number; done: () => void }[] = [];
  let inFlight = false;
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (inFlight || queue.length === 0) return;
    const batch = queue.splice(0, 256);
    inFlight = true;
    void ask(
      bus,
      batch.map((b) => b.request),
    ).then((failed) => {
      errors += failed;
      const t1 = nowMs();
      for (const b of batch) {
        latencies.push(t1 - b.t0);
        b.done();
      }
      inFlight = false;
      flush();
    });
  };
  const start = nowMs();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (nowMs() < end) {
        await new Promise<void>((done) => {
          queue.push({ request: next(), t0: nowMs(), done });
          // Coalesce what arrives in this event-loop turn, as the gateway does.
          if (!scheduled && !inFlight) {
            scheduled = true;
            setImmediate(flush);
          }
        });
      }
    }),
  );
  return summarize(latencies, nowMs() - start, errors);
}
