import type { SimClock } from './clock';
import { nextTurn } from './clock';
import { timeToFirstTokenMs, type LatencyModel, type PrefillWork } from './latency';
import type { Rank } from './rank';
import { runCoreGeneration, type CoreWork } from './core/core-generation';
import type { OutputPlan } from './tokens';
import type { StreamStalls } from '../http/stream-stalls';

/** What one request asks the engine to compute. */
export interface GenerationSpec {
  readonly rank: Rank;
  /** `performance.now()` when the request arrived (TTFT and e2e are measured from here). */
  readonly arrivedAt: number;
  readonly promptTokens: number;
  /** Prompt tokens served from the prefix cache or a KV transfer. */
  readonly cachedTokens: number;
  readonly work: PrefillWork;
  readonly plan: OutputPlan;
  /** With an engine core on the rank: what the core schedules (prefix hashes, media items, remote KV). */
  readonly core?: CoreWork;
}

/** Where produced tokens go: an SSE writer, or nothing for a non-streamed body built at the end. */
export interface TokenSink {
  /** Tokens per write in the zero profile (a batch per event-loop turn); Infinity writes all at once. */
  readonly batch: number;
  /** Called once just before the first token (role chunk, or headers). */
  first(): void;
  /** Writes tokens [from, to); returns false when the socket asks for backpressure. */
  write(from: number, to: number): boolean;
  drained(): Promise<void>;
}

/** Set by the HTTP layer when the client goes away. */
export interface GenerationControl {
  aborted: boolean;
  cancelQueue?: () => void;
}

export interface GenerationOutcome {
  readonly produced: number;
  readonly finishReason: 'stop' | 'length' | 'abort';
  readonly queueSec: number;
  readonly prefillSec: number;
  readonly decodeSec: number;
  readonly ttftSec: number;
  readonly e2eSec: number;
}

/** Engine-specific metrics hooks. Running/waiting/KV gauges are read from the ranks at scrape time instead. */
export interface GenerationRecorder {
  finished(rank: Rank, spec: GenerationSpec, outcome: GenerationOutcome): void;
}

export interface GenerationEnv {
  readonly model: LatencyModel;
  readonly clock: SimClock;
  readonly recorder: GenerationRecorder;
  /** Called when a client went away before its answer was complete. */
  readonly onAbort?: () => void;
  /** Where streamed answers wait for their reader to drain (counted for `SimEngineHandle.stalledStreams`). */
  readonly stalls: StreamStalls;
}

/**
 * Runs one request through its rank: waits for admission, pays the prefill cost, then produces tokens, either
 * in batches per event-loop turn (zero profile) or one per shared decode step (realistic profile).
 */
export async function runGeneration(
  spec: GenerationSpec,
  sink: TokenSink,
  ctl: GenerationControl,
  env: GenerationEnv,
): Promise<GenerationOutcome> {
  const { rank, plan } = spec;
  if (rank.core && spec.core) {
    // The remote KV arrives before the engine schedules the request (its transfer time is paid first).
    const transferMs = (spec.work.transferTokens / 1000) * env.model.kvTransferMsPer1kTokens;
    if (transferMs > 0 && !ctl.aborted) await env.clock.sleep(transferMs);
    return runCoreGeneration(rank.core, spec, spec.core, sink, ctl, env);
  }
  const kvTokens = spec.promptTokens + plan.count;
  if (!rank.tryAdmit(kvTokens)) {
    const ticket = rank.enqueue(kvTokens);
    ctl.cancelQueue = ticket.cancel;
    const admitted = await ticket.admitted;
    ctl.cancelQueue = undefined;
    if (!admitted) {
      const waited = (performance.now() - spec.arrivedAt) / 1000;
      const outcome: GenerationOutcome = {
        produced: 0,
        finishReason: 'abort',
        queueSec: waited,
        prefillSec: 0,
        decodeSec: 0,
        ttftSec: waited,
        e2eSec: waited,
      };
      env.recorder.finished(rank, spec, outcome);
      return outcome;
    }
  }
  const admittedAt = performance.now();
  let produced = 0;
  let firstAt = admittedAt;
  try {
    if (!ctl.aborted) await env.clock.sleep(timeToFirstTokenMs(env.model, spec.work));
    if (!ctl.aborted) {
      firstAt = performance.now();
      sink.first();
      produced = env.model.zero ? await produceBatched(plan.count, sink, ctl) : await produceStepped(plan.count, sink, ctl, rank);
    }
  } finally {
    rank.release(kvTokens);
  }
  const end = performance.now();
  const outcome: GenerationOutcome = {
    produced,
    finishReason: ctl.aborted ? 'abort' : plan.finishReason,
    queueSec: (admittedAt - spec.arrivedAt) / 1000,
    prefillSec: (firstAt - admittedAt) / 1000,
    decodeSec: (end - firstAt) / 1000,
    ttftSec: (firstAt - spec.arrivedAt) / 1000,
    e2eSec: (end - spec.arrivedAt) / 1000,
  };
  env.recorder.finished(rank, spec, outcome);
  return outcome;
}

async function produceBatched(count: number, sink: TokenSink, ctl: GenerationControl): Promise<number> {
  let i = 0;
  while (i < count) {
    const to = Math.min(count, i + sink.batch);
    const ok = sink.write(i, to);
    i = to;
    if (i < count) {
      if (!ok) await sink.drained();
      else await nextTurn();
      if (ctl.aborted) break;
    }
  }
  return i;
}

async function produceStepped(count: number, sink: TokenSink, ctl: GenerationControl, rank: Rank): Promise<number> {
  let ok = sink.write(0, 1);
  let i = 1;
  while (i < count) {
    if (!ok) await sink.drained();
    await rank.nextStep();
    if (ctl.aborted) break;
    ok = sink.write(i, i + 1);
    i++;
  }
  return i;
}
