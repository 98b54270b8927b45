import { request } from 'undici';
import { httpBase } from '../../bootstrap/handoff-wait';
import type { Exchange, RouteHandler } from '../../http/router';
import { sendJson } from '../../http/respond';
import type { SimContext } from '../../sim-context';
import { engineIdOf, invalidParams, loadFailed, type KvRequest, type KvSim, nextEngineStep } from './kv-sim';
import { PushBoard } from './push-board';

/** The simulator's stand-in for the PUSH_REG notification a push decode sends its prefill over NIXL. */
export const PUSH_REGISTER_PATH = '/sim/nixl/push-register';
/** What the decode's params must hold to register (`update_state_after_alloc` reads them by key). */
const DECODE_FIELDS = ['remote_engine_id', 'remote_host', 'remote_port', 'tp_size'] as const;

/**
 * vLLM's NixlPushConnector (`transfer_mode: push`; vLLM `.../kv_connector/v1/nixl/push_scheduler.py`,
 * `push_worker.py`). The decode does not read the prefill's blocks: it registers its own with the prefill, which
 * WRITEs the KV once both its request finished and the registration arrived, whichever comes second (so a router that
 * sends both legs at once overlaps the registration with the prefill). Pairing: the router's `transfer_id` when both
 * sides carry one, else the request id. Prefill: `do_remote_decode` keeps the blocks for a registration (lease
 * `kvLeaseMs`) and answers its coordinates (`remote_engine_id`, `remote_host`, `remote_port`, `tp_size`,
 * `pp_size`, `transfer_mode: "push"`). Decode: `do_remote_prefill` needs `remote_engine_id`, `remote_host`,
 * `remote_port` and `tp_size` (no block ids); it waits for the push at most `kvLeaseMs`.
 */
export class NixlPushSim implements KvSim {
  readonly board: PushBoard;

  constructor(readonly ctx: SimContext) {
    this.board = new PushBoard(ctx.options.kvLeaseMs ?? 30_000);
  }

  async receive(req: KvRequest): Promise<number | undefined> {
    const params = req.params;
    if (params?.['do_remote_prefill'] !== true) return undefined;
    if (
      DECODE_FIELDS.some((k) => !(k in params)) ||
      typeof params['remote_host'] !== 'string' ||
      !Number.isInteger(params['remote_port'])
    ) {
      return invalidParams(this.ctx, req.requestId, 'NIXL push params without the prefill engine id, side channel and tp_size');
    }
    req.onWait();
    await nextEngineStep(this.ctx);
    this.ctx.counters.inc('kvPushRegistrations');
    const requestId = typeof params['remote_request_id'] === 'string' ? params['remote_request_id'] : req.requestId;
    const transferId = typeof params['transfer_id'] === 'string' ? params['transfer_id'] : undefined;
    const url = `${httpBase(params['remote_host'], params['remote_port'] as number)}${PUSH_REGISTER_PATH}`;
    const waitMs = this.ctx.options.kvLeaseMs ?? 30_000;
    try {
      // Once registered, the prefill writes into this decode's blocks whatever becomes of the client: not aborted.
      const res = await request(url, {
        method: 'POST',
        dispatcher: this.ctx.http,
        headers: { 'content-type': 'application/json', ...req.headers },
        body: JSON.stringify({ engine_id: params['remote_engine_id'], request_id: requestId, transfer_id: transferId, wait_ms: waitMs }),
        headersTimeout: waitMs + 5_000,
        bodyTimeout: waitMs + 5_000,
        signal: this.ctx.closed,
      });
      const body = (await res.body.json()) as { num_tokens?: unknown; error?: unknown };
      if (res.statusCode === 200 && typeof body.num_tokens === 'number') return body.num_tokens;
      return loadFailed(this.ctx, req.requestId, `push registration at ${url}: ${String(body.error ?? res.statusCode)}`);
    } catch (err) {
      return loadFailed(this.ctx, req.requestId, `push registration at ${url} failed: ${(err as Error).message}`);
    }
  }

  produce(req: KvRequest, stream: boolean): string | undefined {
    this.ctx.counters.inc('kvHandoffsPrepared');
    const transferId = typeof req.params?.['transfer_id'] === 'string' ? req.params['transfer_id'] : undefined;
    const tokens = req.request.promptTokens;
    // A decode already waiting gets the KV now (its registration's answer counts the push).
    this.board.finished(req.requestId, transferId, tokens);
    if (stream) return undefined;
    return JSON.stringify({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: [[]],
      remote_engine_id: engineIdOf(this.ctx, req.rank.index),
      remote_request_id: req.requestId,
      remote_host: this.ctx.advertiseHost,
      remote_port: this.ctx.port,
      tp_size: 1,
      pp_size: 1,
      remote_num_tokens: tokens,
      transfer_mode: 'push',
    });
  }

  held(): { readonly requests: number; readonly blocks: number } {
    return this.board.held();
  }

  close(): void {
    this.board.close();
  }

  /** Prefill side: a decode's registration (the PUSH_REG notification), answered when the KV is written. */
  registerHandler(): RouteHandler {
    return (ex: Exchange) => {
      const body = (ex.body.ok ? ex.body.value : undefined) as Record<string, unknown> | undefined;
      const engineId = body?.['engine_id'];
      if (!this.ctx.ranks.some((r) => engineIdOf(this.ctx, r.index) === engineId)) {
        sendJson(ex.res, 409, JSON.stringify({ error: `handshake: remote engine id ${String(engineId)} is not this engine` }));
        return;
      }
      const requestId = String(body?.['request_id'] ?? '');
      const transferId = typeof body?.['transfer_id'] === 'string' ? body['transfer_id'] : undefined;
      const waitMs = Math.min(600_000, Math.max(0, Number(body?.['wait_ms'] ?? 0) || 0));
      const cancel = this.board.register(requestId, transferId, waitMs, (tokens) => {
        if (tokens === undefined) {
          sendJson(ex.res, 404, JSON.stringify({ error: `no finished request ${requestId} within ${waitMs} ms` }));
          return;
        }
        this.ctx.counters.inc('kvPushesSent');
        sendJson(ex.res, 200, JSON.stringify({ num_tokens: tokens }));
      });
      ex.res.once('close', cancel);
    };
  }
}
