import { request } from 'undici';
import { TRANSFER_WAIT_PATH, type BootstrapServer } from '../../bootstrap/bootstrap-server';
import { waitForHandoff } from '../../bootstrap/handoff-wait';
import type { SimContext } from '../../sim-context';
import { engineIdOf, invalidParams, loadFailed, type KvRequest, type KvSim, nextEngineStep } from './kv-sim';

/** What the decode's `kv_transfer_params` must hold for a Mooncake pull (`update_state_after_alloc`). */
const DECODE_FIELDS = ['remote_engine_id', 'remote_bootstrap_addr', 'transfer_id'] as const;
const QUERY_TIMEOUT_MS = 10_000;

/**
 * Upstream vLLM's MooncakeConnector (`vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py`).
 * The router makes a `transfer_id` and calls both sides at once.
 * - Prefill: `do_remote_decode` with a `transfer_id` keeps the blocks for that transfer (until a decode takes them or
 *   `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`, here `kvLeaseMs`) and answers without `kv_transfer_params`; without a
 *   `transfer_id` it logs "Missing transfer_id in kv_transfer_params from router!" and frees them at once.
 * - Decode: `do_remote_prefill` needs `remote_engine_id`, `remote_bootstrap_addr` and `transfer_id`, else "Got invalid
 *   KVTransferParams" and the prompt is computed locally. It asks the prefill's bootstrap server `GET /query` for an
 *   engine id it does not know (a failed load when the id is not there), then waits at the prefill for the transfer
 *   (the simulator's long poll; upstream a ZMQ request to the worker that serves that engine id), at most
 *   `kvLeaseMs`. Once asked, the prefill sends the KV even if the decode's client has left, as upstream's worker does.
 */
export class MooncakeUpstreamSim implements KvSim {
  /** Engine ids this decode learnt from bootstrap servers (`_remote_agents`). */
  readonly #known = new Set<string>();
  /** Bootstrap queries in flight, one per address (`_pending_bootstrap_queries`). */
  readonly #queries = new Map<string, Promise<void>>();

  constructor(
    readonly ctx: SimContext,
    readonly bootstrap: BootstrapServer | undefined,
  ) {}

  async receive(req: KvRequest): Promise<number | undefined> {
    const params = req.params;
    if (params?.['do_remote_prefill'] !== true) return undefined;
    if (DECODE_FIELDS.some((k) => !(k in params))) {
      return invalidParams(this.ctx, req.requestId, 'Mooncake params without remote_engine_id, remote_bootstrap_addr and transfer_id');
    }
    const engineId = String(params['remote_engine_id']);
    const addr = String(params['remote_bootstrap_addr']).replace(/\/+$/, '');
    const transferId = String(params['transfer_id']);
    req.onWait();
    await nextEngineStep(this.ctx);
    if (!this.#known.has(engineId)) await this.#query(addr, req.headers);
    if (!this.#known.has(engineId)) {
      return loadFailed(this.ctx, req.requestId, `remote engine_id ${engineId} not found from bootstrap server ${addr}`);
    }
    const path = `${TRANSFER_WAIT_PATH}${encodeURIComponent(transferKey(engineId, transferId))}`;
    // Not ended by the client leaving (the prefill sends once asked); ended when this engine closes.
    const wait = await waitForHandoff(this.ctx, addr, path, this.ctx.options.kvLeaseMs ?? 30_000, req.headers, this.ctx.closed);
    if (wait.ok) return wait.promptTokens;
    return loadFailed(this.ctx, req.requestId, `Mooncake transfer ${transferId} never came from ${addr}: ${wait.reason}`);
  }

  produce(req: KvRequest): string | undefined {
    const transferId = req.params?.['transfer_id'];
    if (typeof transferId !== 'string' || transferId === '') {
      this.ctx.counters.inc('kvTransferIdsMissing');
      this.ctx.logger?.warn({ requestId: req.requestId }, 'Missing transfer_id in kv_transfer_params from router!');
      return undefined;
    }
    this.ctx.counters.inc('kvHandoffsPrepared');
    this.bootstrap?.registerTransfer(transferKey(engineIdOf(this.ctx, req.rank.index), transferId), req.request.promptTokens);
    return undefined;
  }

  held(): { readonly requests: number; readonly blocks: number } {
    return this.bootstrap?.handoffs.held('xfer:') ?? { requests: 0, blocks: 0 };
  }

  /** `GET <addr>/query`: learns every engine id the prefill's bootstrap server lists (failures leave them unknown). */
  #query(addr: string, headers: Record<string, string>): Promise<void> {
    let pending = this.#queries.get(addr);
    if (pending === undefined) {
      pending = this.#ask(addr, headers).finally(() => this.#queries.delete(addr));
      this.#queries.set(addr, pending);
    }
    return pending;
  }

  async #ask(addr: string, headers: Record<string, string>): Promise<void> {
    this.ctx.counters.inc('bootstrapQueries');
    try {
      const res = await request(`${addr}/query`, {
        dispatcher: this.ctx.http,
        headers,
        headersTimeout: QUERY_TIMEOUT_MS,
        bodyTimeout: QUERY_TIMEOUT_MS,
      });
      const body = (await res.body.json()) as Record<string, { engine_id?: unknown }>;
      if (res.statusCode !== 200 || body === null || typeof body !== 'object') return;
      for (const entry of Object.values(body)) if (typeof entry?.engine_id === 'string') this.#known.add(entry.engine_id);
    } catch (err) {
      this.ctx.logger?.debug({ addr, err }, 'Failed to connect to bootstrap server');
    }
  }
}

/** The key of one transfer at the prefill: the engine (DP rank) that computed it and the router's transfer id. */
function transferKey(engineId: string, transferId: string): string {
  return `${engineId}:${transferId}`;
}
