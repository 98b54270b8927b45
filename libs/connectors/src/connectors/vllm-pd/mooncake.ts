import { DEFAULT_MOONCAKE_BOOTSTRAP_PORT } from '@triad/crd';
import { UpstreamError, type KvProfile, type EngineRequest } from '@triad/request';
import { ErrorCode } from '@triad/errors';
import type { JsonFragments } from '../../json-text';
import { finalLegBody, vllmPrefillBody } from '../../request-bodies';
import type { Attempt, EndpointRef, LegRunner } from '../../types';
import { runConcurrentPd } from './concurrent';
import { bootstrapAddr, mooncakeDecodeParams, mooncakePrefillParams, newKvTransferId } from './kv-params';

/**
 * Which flow a Mooncake prefill needs: upstream vLLM's MooncakeConnector is `concurrent` (the router makes a
 * transfer id and calls P and D at once; its prefill answers without `kv_transfer_params`), vllm-ascend's is
 * `sequential` (NIXL-like). The ModelServer's `kvConnector.implementation` decides when set; `auto` takes what the
 * pod-watcher's probe of the prefill's bootstrap server found, and, before any probe result, the sequential flow
 * Kthena uses (a prefill that then answers without params is counted as a mismatch).
 */
export function mooncakeFlowOf(kv: KvProfile | undefined, prefill: EndpointRef): 'concurrent' | 'sequential' {
  if (kv?.mooncake === 'vllm') return 'concurrent';
  if (kv?.mooncake === 'vllm-ascend') return 'sequential';
  return prefill.mooncake?.flow ?? 'sequential';
}

/**
 * The DP rank each Mooncake try's prefill works on, taking turns over the prefill's ranks as vLLM's proxy does
 * (`prefiller_cycle`); an EPD attempt's consumer rank wins (its encoders pushed to that rank).
 */
export class DpRankCycle {
  readonly #next = new Map<string, number>();

  pick(prefill: EndpointRef, ranks: number, pinned: number | undefined): number {
    if (pinned !== undefined) return pinned;
    const r = (this.#next.get(prefill.key) ?? 0) % ranks;
    this.#next.set(prefill.key, r + 1);
    if (this.#next.size > 100_000) this.#next.clear(); // endpoints come and go; a rank order restarting costs nothing
    return r;
  }
}

/** The body the P/D legs are built from and how the decode's stream fails (vLLM EPD hands its rewritten body over). */
export interface PdInput {
  readonly body: Record<string, unknown>;
  /** vLLM EPD: the consumer's DP rank (`X-data-parallel-rank` of the consumer leg), when it has several. */
  readonly consumerRank?: number;
}

/**
 * One concurrent try of upstream vLLM's Mooncake flow: a fresh `transfer_id`, the prefill with
 * `{do_remote_decode, transfer_id}` and `X-data-parallel-rank`, the decode with the prefill's bootstrap address, the
 * engine id of that rank (read once from the prefill's `GET /query` by the pod-watcher) and the same transfer id.
 */
export async function runMooncakeConcurrent(
  ctx: EngineRequest,
  attempt: Attempt,
  index: number,
  run: LegRunner,
  input: PdInput,
  ranks: DpRankCycle,
): Promise<void> {
  const prefill = attempt.prefill as EndpointRef;
  const engineIds = prefill.mooncake?.engineIds ?? [];
  if (engineIds.length === 0) {
    throw new UpstreamError(
      ErrorCode.UpstreamError,
      `prefill on ${prefill.key} runs vLLM's Mooncake connector, but its bootstrap server has not reported engine ids ` +
        `(GET ${bootstrapAddr(prefill.ip, prefill.bootstrapPort ?? DEFAULT_MOONCAKE_BOOTSTRAP_PORT)}/query)`,
      { stage: 'prefill', endpoint: prefill.key, item: -1, status: 0 },
      true,
    );
  }
  const rank = ranks.pick(prefill, engineIds.length, attempt.consumerDpRank);
  const engineId = engineIds[rank];
  if (engineId === undefined) {
    throw new UpstreamError(
      ErrorCode.UpstreamError,
      `prefill on ${prefill.key} has ${engineIds.length} DP rank(s) in its Mooncake bootstrap server; rank ${rank} was asked for`,
      { stage: 'prefill', endpoint: prefill.key, item: -1, status: 0 },
      true,
    );
  }
  const transferId = newKvTransferId();
  const decodeKvParams = mooncakeDecodeParams(
    bootstrapAddr(prefill.ip, prefill.bootstrapPort ?? DEFAULT_MOONCAKE_BOOTSTRAP_PORT),
    engineId,
    transferId,
  );
  // One serialization of the messages for both bodies.
  const fragments: JsonFragments = new Map();
  await runConcurrentPd(ctx, attempt, index, run, {
    prefill,
    prefillBody: vllmPrefillBody(input.body, mooncakePrefillParams(transferId), fragments),
    decodeBody: finalLegBody(input.body, ctx.proxy.injectUsage, decodeKvParams, undefined, fragments),
    decodeKvParams,
    baseBody: input.body,
    // vLLM answers 200 and opens the stream before the decode waits for its KV; a failed load then surfaces as an
    // error event (kv_load_failure_policy `fail`), which the leg fails and the try retries like the 500 it stands for.
    prefillHeaders: { 'X-data-parallel-rank': String(rank) },
  });
}
