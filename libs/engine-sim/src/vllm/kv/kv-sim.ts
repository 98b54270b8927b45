import type { Rank } from '../../engine/rank';
import type { InferenceRequest } from '../../openai/inference-request';
import type { SimContext } from '../../sim-context';

/** What a simulated vLLM KV connector gets from the request it works for. */
export interface KvRequest {
  readonly request: InferenceRequest;
  /** The request's `kv_transfer_params` when it is an object (vLLM's pydantic model: a dict, or absent). */
  readonly params: Record<string, unknown> | undefined;
  /** The `x-request-id` (vLLM's external request id). */
  readonly requestId: string;
  readonly rank: Rank;
  /** Trace headers for the connector's own calls. */
  readonly headers: Record<string, string>;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  /** Called once before the decode waits for remote KV (a streamed answer starts then, as vLLM's server does). */
  readonly onWait: () => void;
}

/**
 * The KV side of one simulated vLLM instance (`--kv-transfer-config` `kv_connector`), re-derived from the
 * connector's code (docs/engine-sim.md, *vLLM KV connectors*). A decode asks `receive` before computing the prompt;
 * a prefill asked for a remote decode (`do_remote_decode`) calls `produce` after its one token.
 */
export interface KvSim {
  /**
   * Decode side: the prompt tokens whose KV arrived from a remote prefill. Undefined when none was asked for, when
   * the params are unusable ("Got invalid KVTransferParams": the decode computes the prompt itself) or when a failed
   * load is recomputed (`kv_load_failure_policy: recompute`). Throws {@link KvLoadFailedError} under `fail`.
   */
  receive(req: KvRequest): Promise<number | undefined>;
  /**
   * Prefill side, for a request with `do_remote_decode` once its one token is out: keep (or hand over) the KV.
   * Returns the answer's `kv_transfer_params` as raw JSON (undefined: `null`, vLLM's answer without params).
   */
  produce(req: KvRequest, stream: boolean): string | undefined;
  /** A prefill (or aggregated) instance computed a prompt, whatever its params (LMCache stores every one). */
  stored?(req: KvRequest): void;
  /** KV held for decodes that have not taken it (also `/metrics` `triad_sim_kv_held_*`). */
  held(): { readonly requests: number; readonly blocks: number };
  /** Ends what the connector keeps waiting (the engine closes). */
  close?(): void;
}

/**
 * A remote KV load failed and the engine's `kv_load_failure_policy` is `fail` (vLLM's default): the request
 * finishes with an error, which vLLM's server answers as a 500 (or an error event once its stream is open).
 */
export class KvLoadFailedError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'KvLoadFailedError';
  }
}

/** `kv_transfer_params` as vLLM's request model takes it: an object, else nothing. */
export function kvParamsOf(body: Record<string, unknown>): Record<string, unknown> | undefined {
  const v = body['kv_transfer_params'];
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** The decode named a remote prefill it cannot use: vLLM logs "Got invalid KVTransferParams" and computes the prompt. */
export function invalidParams(ctx: SimContext, requestId: string, why: string): undefined {
  ctx.counters.inc('kvParamsInvalid');
  ctx.logger?.debug({ requestId, why }, 'Got invalid KVTransferParams; this request will not utilize KVTransfer');
  return undefined;
}

/**
 * A remote KV load failed: counted, then recomputed locally (`recompute`) or the request fails (`fail`, vLLM's
 * default since `kv_load_failure_policy` exists).
 */
export function loadFailed(ctx: SimContext, requestId: string, reason: string): undefined {
  ctx.counters.inc('kvPullFailures');
  ctx.logger?.debug({ requestId, reason }, 'remote KV load failed');
  if ((ctx.options.kvLoadFailurePolicy ?? 'fail') === 'recompute') return undefined;
  throw new KvLoadFailedError(reason);
}

/**
 * Waits for the decode's next engine step: vLLM's scheduler hands a request's transfer to the worker in the step
 * that schedules it (`build_connector_meta`, then `start_load_kv`), so a pull or a push registration leaves one
 * step after the request arrived. No wait in the zero profile.
 */
export function nextEngineStep(ctx: SimContext): Promise<void> {
  return ctx.clock.sleep(ctx.latency.zero ? 0 : ctx.latency.decodeMsPerToken);
}

/** The engine id vLLM gives a DP rank of this instance (rank 0 keeps the instance's own). */
export function engineIdOf(ctx: SimContext, rank: number): string {
  return rank === 0 ? ctx.engineId : `${ctx.engineId}-dp${rank}`;
}
