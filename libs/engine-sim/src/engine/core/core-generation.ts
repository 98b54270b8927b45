import { randomUUID } from 'node:crypto';
import type { GenerationControl, GenerationEnv, GenerationOutcome, GenerationSpec, TokenSink } from '../generation';
import type { PublishedBlock } from './block-pool';
import type { CoreItem, EngineCore } from './engine-core';

/** What the engine core needs of a request beyond the generation spec (computed by the engine's route). */
export interface CoreWork {
  readonly blockHashes: readonly number[];
  /** The engine's keys of the leading blocks, when it publishes KV events. */
  readonly published?: readonly PublishedBlock[];
  readonly items: readonly CoreItem[];
  /** Prompt tokens whose KV arrived from a remote prefill. */
  readonly externalTokens: number;
}

/**
 * Runs one request on its rank's engine core: the core decides when its prefill chunks and decode tokens run;
 * each token it samples is written to the sink at the end of that step. A client that leaves aborts the request
 * in the core (it leaves the queue or the batch and frees its blocks).
 */
export async function runCoreGeneration(
  core: EngineCore,
  spec: GenerationSpec,
  work: CoreWork,
  sink: TokenSink,
  ctl: GenerationControl,
  env: GenerationEnv,
): Promise<GenerationOutcome> {
  const id = randomUUID();
  let produced = 0;
  let firstAt = 0;
  let scheduledAt = 0;
  let ok = true;
  const aborted = await new Promise<boolean>((resolve) => {
    if (ctl.aborted) {
      resolve(true);
      return;
    }
    core.submit({
      id,
      promptTokens: spec.promptTokens,
      blockHashes: work.blockHashes,
      ...(work.published ? { published: work.published } : {}),
      items: work.items,
      maxTokens: Math.max(1, spec.plan.count),
      externalTokens: work.externalTokens,
      onToken: () => {
        if (produced === 0) {
          firstAt = performance.now();
          sink.first();
        }
        // A socket asking for backpressure still gets its token: the engine does not wait for slow clients.
        ok = sink.write(produced, produced + 1) && ok;
        produced++;
      },
      onScheduled: () => {
        if (scheduledAt === 0) scheduledAt = performance.now();
      },
      onFinish: resolve,
    });
    ctl.cancelQueue = () => core.abort(id);
  });
  ctl.cancelQueue = undefined;
  if (!ok && !aborted) await sink.drained();
  const end = performance.now();
  const started = scheduledAt || end;
  const first = firstAt || end;
  const outcome: GenerationOutcome = {
    produced,
    finishReason: aborted || ctl.aborted ? 'abort' : spec.plan.finishReason,
    queueSec: (started - spec.arrivedAt) / 1000,
    prefillSec: (first - started) / 1000,
    decodeSec: (end - first) / 1000,
    ttftSec: (first - spec.arrivedAt) / 1000,
    e2eSec: (end - spec.arrivedAt) / 1000,
  };
  env.recorder.finished(spec.rank, spec, outcome);
  return outcome;
}
