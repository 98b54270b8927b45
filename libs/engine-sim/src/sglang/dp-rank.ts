import type { IncomingHttpHeaders } from 'node:http';
import { EngineHttpError } from '../http/engine-error';

/** SGLang `--load-balance-method` values the simulator models (`auto` resolves per role). */
export type LoadBalanceMethod = 'auto' | 'follow_bootstrap_room' | 'round_robin';

/** `auto` is `follow_bootstrap_room` on a prefill (rank = room % dp) and `round_robin` elsewhere (decode included). */
export function resolveLoadBalanceMethod(method: LoadBalanceMethod | undefined, role: string): Exclude<LoadBalanceMethod, 'auto'> {
  if (method === undefined || method === 'auto') return role === 'prefill' ? 'follow_bootstrap_room' : 'round_robin';
  return method;
}

/** Python `int()` of a header value: optional sign and surrounding spaces, decimal digits only. */
function pythonInt(text: string): number | undefined {
  return /^\s*[+-]?\d+\s*$/.test(text) ? Number(text.trim()) : undefined;
}

function intField(body: Record<string, unknown>, field: string): number | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    throw new EngineHttpError(400, `${field}: Input should be a valid integer`, 'BadRequestError', field);
  }
  return v;
}

/**
 * The DP rank a request pins (`routed_dp_rank`), read the way SGLang's serving layer does: the
 * `X-Data-Parallel-Rank` header wins over the body, `data_parallel_rank` is the deprecated alias used when
 * `routed_dp_rank` is absent. A header that is not an integer is a 400 here, before dispatch.
 */
export function requestedDpRank(headers: IncomingHttpHeaders, body: Record<string, unknown>): number | undefined {
  const fromBody = intField(body, 'routed_dp_rank') ?? intField(body, 'data_parallel_rank');
  const raw = headers['x-data-parallel-rank'];
  const header = Array.isArray(raw) ? raw[0] : raw;
  if (header === undefined) return fromBody;
  const rank = pythonInt(header);
  if (rank === undefined) throw new EngineHttpError(400, `Invalid X-Data-Parallel-Rank header: must be an integer, got '${header}'`);
  return rank;
}

/**
 * The tokenizer's range check: rank 0 on a server without DP is ignored (undefined), anything else outside
 * [0, dp) is the message of the ValueError SGLang raises (a 400 once dispatched).
 */
export function checkDpRank(rank: number | undefined, dpSize: number): { rank: number | undefined } | { error: string } {
  if (rank === undefined) return { rank: undefined };
  if (dpSize <= 1 && rank === 0) return { rank: undefined };
  if (rank < 0 || rank >= dpSize) return { error: `routed_dp_rank=${rank} out of range [0, ${dpSize})` };
  return { rank };
}

/** Decode only: which prefill DP rank holds the KV (`disagg_prefill_dp_rank`). */
export function prefillDpRankHint(body: Record<string, unknown>): number | undefined {
  return intField(body, 'disagg_prefill_dp_rank');
}
