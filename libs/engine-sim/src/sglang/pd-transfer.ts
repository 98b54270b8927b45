import { request } from 'undici';
import { ROOM_RANK_WAIT_PATH, ROOM_WAIT_PATH } from '../bootstrap/bootstrap-server';
import { httpBase, waitForHandoff } from '../bootstrap/handoff-wait';
import { EngineHttpError } from '../http/engine-error';
import type { SimContext } from '../sim-context';
import { rankOfRoom, type BootstrapTarget } from './bootstrap-fields';
import { DEFAULT_BOOTSTRAP_PORT } from './server-info';

/** What a decode learns from a prefill's bootstrap server (`GET /route`), cached per address as SGLang does. */
interface PrefillInfo {
  readonly dpSize: number;
  readonly loadBalanceMethod: string;
}

/** The KV arrived (the prompt tokens the prefill computed), or the error to answer with (undefined: the client left). */
export type TransferResult =
  { readonly ok: true; readonly promptTokens: number } | { readonly ok: false; readonly error: EngineHttpError | undefined };

const RETRY_MS = 50;

function seconds(ms: number): string {
  return (ms / 1000).toFixed(1);
}

/** SGLang decode's failure when it cannot reach the prefill's bootstrap server (wrong host/port, prefill down). */
export function handshakeError(room: string, addr: string): EngineHttpError {
  return new EngineHttpError(
    500,
    `Decode handshake failed for request rank=0 bootstrap_room=${room} with exception KVTransferError(bootstrap_room=${room}): ` +
      `Could not fetch prefill parallel info from bootstrap_addr: ${addr}`,
    'InternalServerError',
  );
}

/** SGLang decode's failure when the KV of a room never arrives within the waiting timeout. */
export function waitingTimeoutError(rid: string, room: string, timeoutMs: number): EngineHttpError {
  return new EngineHttpError(
    500,
    `Decode transfer failed for request rank=0 req.rid='${rid}' req.bootstrap_room=${room} ` +
      `with exception KVTransferError(bootstrap_room=${room}): ` +
      `Request ${room} timed out after ${seconds(timeoutMs)}s in KVPoll.WaitingForInput`,
    'InternalServerError',
  );
}

/** SGLang prefill's failure when no decode ever pairs with its room within the bootstrap timeout. */
export function bootstrapTimeoutError(rid: string, room: string, timeoutMs: number): EngineHttpError {
  return new EngineHttpError(
    500,
    `Prefill bootstrap failed for request rank=0 req.rid='${rid}' req.bootstrap_room=${room} ` +
      `with exception KVTransferError(bootstrap_room=${room}): ` +
      `Request ${room} timed out after ${seconds(timeoutMs)}s in KVPoll.Bootstrapping`,
    'InternalServerError',
  );
}

/**
 * The decode side of SGLang PD: finds the prefill's bootstrap server, works out which prefill DP rank holds the
 * room, and waits for that rank to have computed it.
 */
export class DecodeTransfers {
  readonly #peers = new Map<string, PrefillInfo>();

  constructor(
    private readonly ctx: SimContext,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Waits for the KV of one item. The prefill rank is `disagg_prefill_dp_rank` when given, else 0 for a prefill
   * without DP, else room % dp when the prefill follows the room, else asked from its bootstrap server (counted in
   * `prefillRankLookups`). A hint that names the wrong rank waits on a room nobody fills, as in SGLang.
   */
  async await(
    target: BootstrapTarget,
    rid: string,
    hint: number | undefined,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<TransferResult> {
    const port = target.port ?? this.ctx.options.bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT;
    if (target.host === undefined) return { ok: false, error: handshakeError(target.room, `None:${port}`) };
    const base = httpBase(target.host, port);
    const deadline = Date.now() + this.timeoutMs;
    let rank = hint;
    if (rank === undefined) {
      const info = await this.#info(base, deadline, signal);
      if (!info) return { ok: false, error: signal.aborted ? undefined : handshakeError(target.room, `${target.host}:${port}`) };
      if (info.dpSize <= 1) rank = 0;
      else if (info.loadBalanceMethod === 'follow_bootstrap_room') rank = rankOfRoom(target.room, info.dpSize);
      else {
        this.ctx.counters.inc('prefillRankLookups');
        const path = `${ROOM_RANK_WAIT_PATH}${target.room}`;
        const lookup = await waitForHandoff(this.ctx, base, path, deadline - Date.now(), headers, signal, 'rank');
        if (!lookup.ok) return { ok: false, error: signal.aborted ? undefined : waitingTimeoutError(rid, target.room, this.timeoutMs) };
        rank = lookup.promptTokens;
      }
    }
    const path = `${ROOM_WAIT_PATH}${target.room}?rank=${rank}`;
    const waited = await waitForHandoff(this.ctx, base, path, deadline - Date.now(), headers, signal);
    if (waited.ok) return waited;
    if (signal.aborted) return { ok: false, error: undefined };
    const error = waited.unreachable
      ? handshakeError(target.room, `${target.host}:${port}`)
      : waitingTimeoutError(rid, target.room, this.timeoutMs);
    return { ok: false, error };
  }

  async #info(base: string, deadline: number, signal: AbortSignal): Promise<PrefillInfo | undefined> {
    const cached = this.#peers.get(base);
    if (cached) return cached;
    while (Date.now() < deadline && !signal.aborted) {
      try {
        // SGLang's "server info" query: every rank index -1.
        const url = `${base}/route?engine_rank=-1&target_dp_group=-1&target_pp_rank=-1`;
        const res = await request(url, { dispatcher: this.ctx.http, signal });
        const body = (await res.body.json()) as { prefill_dp_size?: unknown; load_balance_method?: unknown };
        if (res.statusCode === 200) {
          const info: PrefillInfo = {
            dpSize: typeof body.prefill_dp_size === 'number' ? body.prefill_dp_size : 1,
            loadBalanceMethod: typeof body.load_balance_method === 'string' ? body.load_balance_method : 'follow_bootstrap_room',
          };
          this.#peers.set(base, info);
          return info;
        }
      } catch {
        // Not up yet, or not there at all: retried until the deadline.
      }
      await this.ctx.clock.sleep(Math.min(RETRY_MS, Math.max(0, deadline - Date.now())));
    }
    return undefined;
  }
}
