import type { KvBlockIndex } from './kv-block-index';

interface Pending {
  readonly server: string;
  readonly keys: readonly string[];
  /** Keys an engine had reported when the request was scheduled. */
  readonly seen: Uint8Array;
  readonly due: number;
}

interface KeyAgreementCounts {
  /** Block keys the gateway computed for this ModelServer's requests (settled ones). */
  computed: number;
  /** Of those, keys some engine reported holding, before or shortly after the request. */
  matched: number;
}

interface KeyAgreementOptions {
  /** How long after a decision the engines have to report the request's blocks. Default 5 000 ms. */
  readonly settleMs?: number;
  /** Requests waiting to settle; past it the oldest settle early. Default 20 000. */
  readonly maxPending?: number;
}

/**
 * Whether the gateway's block keys are the engines' own, per ModelServer: for each scheduled request with keys, the
 * share of them any engine reports holding (in the KV index, any source, any KV-cache group) at decision time or
 * within `settleMs` after it (the engine publishes the prompt's blocks once it has prefilled them). Keys that never
 * show up mean the tokenization, the template or the hash disagree with the engine: the precise scorer then scores
 * 0 where it should not. Counts are cumulative (`computed`, `matched`), for Prometheus counters.
 */
export class KeyAgreement {
  readonly #index: KvBlockIndex;
  readonly #settleMs: number;
  readonly #maxPending: number;
  readonly #pending: Pending[] = [];
  #head = 0;
  readonly #counts = new Map<string, KeyAgreementCounts>();

  constructor(index: KvBlockIndex, options: KeyAgreementOptions = {}) {
    this.#index = index;
    this.#settleMs = options.settleMs ?? 5_000;
    this.#maxPending = options.maxPending ?? 20_000;
  }

  /** Notes a scheduled request's keys (`server` = `namespace/name`). */
  observe(server: string, keys: readonly string[], now: number): void {
    if (keys.length === 0) return;
    const seen = new Uint8Array(keys.length);
    keys.forEach((k, i) => (seen[i] = this.#index.knows(k) ? 1 : 0));
    this.#pending.push({ server, keys, seen, due: now + this.#settleMs });
    if (this.#pending.length - this.#head > this.#maxPending) this.#settle(this.#pending[this.#head]);
    this.settle(now);
  }

  /** Settles every request whose time is up (call before reading the counts). */
  settle(now: number): void {
    while (this.#head < this.#pending.length && this.#pending[this.#head].due <= now) {
      this.#settle(this.#pending[this.#head]);
    }
    if (this.#head > 1024 && this.#head * 2 > this.#pending.length) {
      this.#pending.splice(0, this.#head);
      this.#head = 0;
    }
  }

  /** Cumulative counts per ModelServer. */
  counts(): ReadonlyMap<string, KeyAgreementCounts> {
    return this.#counts;
  }

  #settle(p: Pending): void {
    this.#head++;
    let matched = 0;
    p.keys.forEach((k, i) => {
      if (p.seen[i] === 1 || this.#index.knows(k)) matched++;
    });
    let c = this.#counts.get(p.server);
    if (!c) this.#counts.set(p.server, (c = { computed: 0, matched: 0 }));
    c.computed += p.keys.length;
    c.matched += matched;
  }
}
