/**
 * Protocol counters a test reads through `handle.counters()` to tell a real hand-off from a silent fallback.
 * All names are always present (zero until they happen), so a test can assert on any of them.
 */
const COUNTER_NAMES = [
  /** Inference requests accepted (chat, completions, responses, embeddings, generate, encode). */
  'requests',
  /** Requests answered with an error body produced by validation (4xx). */
  'badRequests',
  /** Requests a fault was applied to. */
  'faultsInjected',
  /** Client disconnects before the response finished. */
  'aborted',
  /** Requests refused with 401 by the `apiKey` check (no or another `Authorization: Bearer`). */
  'unauthorized',
  // vLLM encode / EC consumer
  /** Distinct items an encoder encoded (a repeated image in one request is encoded once). */
  'encodes',
  'ecWrites',
  'ecHits',
  'ecMisses',
  /** Encoder: requests served and media positions in them (a batch of 3 images is 1 request, 3 items). */
  'encoderRequests',
  'encoderItems',
  /** EC consumer (prefill, both) or decode: items it had to run the vision encoder for itself. */
  'localEncodes',
  /** `image_embeds`/`audio_embeds`/`video_embeds` parts accepted (with `enableMmEmbeds`). */
  'embedsParts',
  /** Requests failed because an item's encoding could not be had and the request carried no media to encode. */
  'ecRequestsFailed',
  // vLLM NIXL P2P EC connector (ECCPUConnector)
  /** Producer: pulls it answered / refused (unknown item, wrong size). */
  'ecPullsServed',
  'ecPullsRejected',
  /** Consumer: pulls that brought the encoding / failed (refused or unreachable producer). */
  'ecPullsReceived',
  'ecPullsFailed',
  /** Consumer: pulls answered by an encoder in the same process without HTTP (`nixlSideChannel: 'in-process'`). */
  'ecPullsInProcess',
  /** Consumer: announced `size_bytes` that does not match the item's size (the request fails). */
  'ecHandlesInvalid',
  // vLLM Mooncake EC connector (ECMooncakeConnector)
  /** Producer: pushes delivered to / refused or not delivered to a consumer's control address. */
  'pushesSent',
  'pushFailures',
  /** Consumer: pushes that arrived on a control listener. */
  'pushesReceived',
  /** Consumer: items whose push did not arrive within the push wait timeout (the request fails). */
  'pushWaitTimeouts',
  // vLLM OpenAI surface beyond chat and completions
  /** Inputs a pooling runner embedded (`/v1/embeddings`: one per string or token-id list). */
  'embeddings',
  /** Responses API requests answered (`/v1/responses`, stream or not). */
  'responses',
  /** Requests that carried a valid `X-data-parallel-rank` header. */
  'dpRankPinned',
  // vLLM NIXL-style KV hand-off
  'kvHandoffsPrepared',
  'kvPullsServed',
  'kvPullsRejected',
  /** Decode: the prompt's KV arrived from a prefill (pulled, pushed, or loaded from a shared LMCache backend). */
  'kvPullsReceived',
  /** Decode pulls answered by a prefill in the same process without HTTP (`nixlSideChannel: 'in-process'`). */
  'kvPullsInProcess',
  'kvPullFailures',
  'kvLeasesExpired',
  /** Decode: computed the prompt itself (no remote KV asked for, unusable params, or a failed load recomputed). */
  'localPrefillFallbacks',
  /** Decode: `do_remote_prefill` with params its connector cannot use (vLLM's "Got invalid KVTransferParams"). */
  'kvParamsInvalid',
  /** Upstream Mooncake prefill: `do_remote_decode` without a `transfer_id` (answered without params, KV freed). */
  'kvTransferIdsMissing',
  /** Decode: requests failed because their remote KV load failed (`kv_load_failure_policy: fail`). */
  'kvLoadFailedRequests',
  /** Upstream Mooncake decode: `GET /query` calls to prefill bootstrap servers (engine ids it did not know). */
  'bootstrapQueries',
  /** NIXL push: registrations a decode sent, and KV writes a prefill made into a registered decode. */
  'kvPushRegistrations',
  'kvPushesSent',
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
  // vLLM engine core (`engineCore`): what the benchmarks read as hit ratios
  /** Prompt tokens looked up in the prefix cache when a request was scheduled, and those found. */
  'prefixQueryTokens',
  'prefixHitTokens',
  /** Media items a scheduled chunk needed: found in the encoder cache / encoded here / loaded through the EC connector. */
  'encoderCacheHits',
  'encoderCacheMisses',
  'encoderInputsLoaded',
  /** Requests preempted for lack of KV blocks (recomputed later). */
  'preemptions',
  /** Engine steps run. */
  'engineSteps',
] as const;
type CounterName = (typeof COUNTER_NAMES)[number];

/**
 * Mutable counters of one simulated engine (no module-level state: many sims share a process). Besides the names
 * above, the snapshot holds `dpRank<i>Requests` for each data-parallel rank: the inference requests it served.
 */
export class SimCounters {
  readonly #values: Record<CounterName, number>;
  readonly #rankRequests: number[];

  constructor(ranks = 1) {
    this.#values = Object.fromEntries(COUNTER_NAMES.map((n) => [n, 0])) as Record<CounterName, number>;
    this.#rankRequests = new Array<number>(Math.max(1, ranks)).fill(0);
  }

  /** Counts a request served by data-parallel rank `rank`. */
  incRank(rank: number): void {
    if (rank >= 0 && rank < this.#rankRequests.length) this.#rankRequests[rank] += 1;
  }

  inc(name: CounterName, by = 1): void {
    this.#values[name] += by;
  }

  get(name: CounterName): number {
    return this.#values[name];
  }

  snapshot(): Record<string, number> {
    const out: Record<string, number> = { ...this.#values };
    this.#rankRequests.forEach((n, i) => (out[`dpRank${i}Requests`] = n));
    return out;
  }
}
