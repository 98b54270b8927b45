import type { FaultMode, FaultSpec } from './options';

/** What an inference request should suffer, decided once when it arrives. */
export interface AppliedFault {
  readonly mode: Exclude<FaultMode, 'ok'>;
  readonly delayMs: number;
  /** `die-mid-stream`: output tokens written before the connection drops (undefined: half the answer). */
  readonly afterTokens?: number;
}

const DEFAULT_SLOW_FIRST_BYTE_MS = 1000;

/** The current fault of one simulator; `count` requests are affected, then it reverts to `ok`. */
export class FaultController {
  #spec: FaultSpec = { mode: 'ok' };
  #remaining = Infinity;

  constructor(initial?: FaultSpec) {
    if (initial) this.set(initial);
  }

  set(spec: FaultSpec): void {
    this.#spec = spec;
    this.#remaining = spec.count ?? Infinity;
  }

  current(): FaultSpec & { remaining: number | null } {
    return { ...this.#spec, remaining: Number.isFinite(this.#remaining) ? this.#remaining : null };
  }

  /** Takes one request's worth of the fault (undefined when none applies). */
  take(): AppliedFault | undefined {
    const spec = this.#spec;
    if (spec.mode === 'ok') return undefined;
    this.#remaining -= 1;
    if (this.#remaining <= 0) this.set({ mode: 'ok' });
    const applied = { mode: spec.mode, delayMs: spec.delayMs ?? (spec.mode === 'slow-first-byte' ? DEFAULT_SLOW_FIRST_BYTE_MS : 0) };
    return spec.afterTokens === undefined ? applied : { ...applied, afterTokens: spec.afterTokens };
  }
}
