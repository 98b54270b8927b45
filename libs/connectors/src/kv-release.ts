import type { Attempt, EndpointRef } from '@triad/bus';
import type { LegOwner, Leg } from './leg';
import type { KvStrandReport, LegOutcome, StreamRelay } from './types';
import { SseUsageRelay } from './usage';

/**
 * Where a release leg for a stranded vLLM hand-off goes: a decode the decision pairs with the same prefill (so it
 * can reach that prefill's KV) other than the one that did not take it, which may be down; else that same decode.
 */
export function releaseTarget(attempts: readonly Attempt[], report: KvStrandReport): EndpointRef {
  for (const a of attempts) {
    if (a.prefill?.key === report.prefill.key && a.endpoint.key !== report.decode.key) return a.endpoint;
  }
  return report.decode;
}

/**
 * Owns one release leg, outside the request's stage loop: it outlives the request (the client may be gone), is not
 * aborted with the request's legs, writes nothing to the client and reports only its outcome.
 */
export class ReleaseLegOwner implements LegOwner {
  readonly suppressUsage = true;
  readonly #settled: (outcome: LegOutcome) => void;

  constructor(settled: (outcome: LegOutcome) => void) {
    this.#settled = settled;
  }

  legSettled(_leg: Leg, outcome: LegOutcome): void {
    this.#settled(outcome);
  }

  legWaiting(): void {}

  commit(): boolean {
    return false;
  }

  writeClient(): void {}

  endClient(): void {}

  recordUsage(): void {}

  streamRelay(): StreamRelay {
    return new SseUsageRelay(true);
  }
}
