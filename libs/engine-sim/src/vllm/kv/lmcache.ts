import type { SimContext } from '../../sim-context';
import type { KvRequest, KvSim } from './kv-sim';

/** Prompts stored per shared LMCache backend (its `remote_url`), process-wide like the backend it stands for. */
const stores = new Map<string, Map<string, number>>();
/** Most prompts one stand-in store keeps (oldest dropped first, as a bounded cache would). */
const STORE_LIMIT = 100_000;

function storeOf(name: string): Map<string, number> {
  let store = stores.get(name);
  if (store === undefined) stores.set(name, (store = new Map()));
  return store;
}

/**
 * LMCacheConnectorV1 with a shared remote backend (`remote_url`: an LMCache server, Redis, Mooncake store): the
 * set-up Triad's sequential `lmcache` flow serves. A producer stores the KV of every prompt it computes, keyed by
 * the tokens (here the model and prompt text); a consumer looks the prompt up and loads what is there, computing the
 * rest. No `kv_transfer_params` are needed or returned. The store is in-process: prefills and decodes must run in one
 * process (the local stack, tests) to share it. LMCache's P2P PD backend (`enable_pd`, which moves KV only for a
 * request carrying `disagg_spec`) is not simulated: see docs/protocols/vllm.md.
 */
export class LmcacheSim implements KvSim {
  readonly #store: Map<string, number>;

  constructor(readonly ctx: SimContext) {
    this.#store = storeOf(ctx.options.lmcacheStore ?? 'default');
  }

  receive(req: KvRequest): Promise<number | undefined> {
    const tokens = this.#store.get(keyOf(req));
    return Promise.resolve(tokens);
  }

  produce(): string | undefined {
    return undefined;
  }

  /** A producer computed a prompt: its KV goes to the shared backend. */
  stored(req: KvRequest): void {
    const key = keyOf(req);
    this.#store.delete(key);
    if (this.#store.size >= STORE_LIMIT) this.#store.delete(this.#store.keys().next().value as string);
    this.#store.set(key, req.request.promptTokens);
    this.ctx.counters.inc('kvHandoffsPrepared');
  }

  held(): { readonly requests: number; readonly blocks: number } {
    // What sits in the shared backend is not held by this engine for a peer.
    return { requests: 0, blocks: 0 };
  }
}

function keyOf(req: KvRequest): string {
  return `${req.request.model ?? ''}\n${req.request.promptText}`;
}
