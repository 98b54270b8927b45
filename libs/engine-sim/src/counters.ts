/**
 * Protocol counters a test reads through `handle.counters()` to tell a real hand-off from a silent fallback.
 * All names are always present (zero until they happen), so a test can assert on any of them.
 */
export const COUNTER_NAMES = [
  /** Inference requests accepted (chat, completions, generate, encode). */
  'requests',
  /** Requests answered with an error body produced by validation (4xx). */
  'badRequests',
  /** Requests a fault was applied to. */
  'faultsInjected',
  /** Client disconnects before the response finished. */
  'aborted',
  // vLLM encode / EC consumer
  'encodes',
  'ecWrites',
  'ecHits',
  'ecMisses',
  // vLLM NIXL-style KV hand-off
  'kvHandoffsPrepared',
  'kvPullsServed',
  'kvPullsRejected',
  'kvPullsReceived',
  /** Decode pulls answered by a prefill in the same process without HTTP (`nixlSideChannel: 'in-process'`). */
  'kvPullsInProcess',
  'kvPullFailures',
  'kvLeasesExpired',
  'localPrefillFallbacks',
  // SGLang PD bootstrap
  'roomsRegistered',
  'roomsMatched',
  'bootstrapTimeouts',
  // SGLang EPD (language-only prefill -> encoders)
  'encoderCalls',
  'encoderFailures',
  /** SGLang encoder: media items encoded for language-only servers. */
  'encoderItemsServed',
  /** SGLang language-only: media items encoded locally because no encoder was registered. */
  'localEncodes',
  // SGLang encoder registry (language-only server's registry listener and health checker)
  'registryRegistrations',
  'registryUnregistrations',
  'registryEvictions',
  'registryRevivals',
  /** Evicted encoders forgotten after the evicted TTL. */
  'registryDrops',
  'registryProbeRounds',
  // SGLang PD details
  /** PD requests with n > 1 (all samples on one room): held until the waiting timeout, then failed. */
  'parallelSamplingHangs',
  /** Decode asked the prefill's bootstrap server which DP rank holds a room (no hint, prefill not room-following). */
  'prefillRankLookups',
] as const;
export type CounterName = (typeof COUNTER_NAMES)[number];

/** Mutable counters of one simulated engine (no module-level state: many sims share a process). */
export class SimCounters {
  readonly #values: Record<CounterName, number>;

  constructor() {
    this.#values = Object.fromEntries(COUNTER_NAMES.map((n) => [n, 0])) as Record<CounterName, number>;
  }

  inc(name: CounterName, by = 1): void {
    this.#values[name] += by;
  }

  get(name: CounterName): number {
    return this.#values[name];
  }

  snapshot(): Record<string, number> {
    return { ...this.#values };
  }
}
