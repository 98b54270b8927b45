import type { ConnectorName, EngineRequest, UpstreamError } from '@triad/request';
import type { Attempt, Connector, LegRunner } from '../types';
import { DpRankCycle, mooncakeFlowOf, runMooncakeConcurrent, type PdInput } from './vllm-pd/mooncake';
import { PushCoordinates, runNixlPush } from './vllm-pd/nixl-push';
import { runSequentialPd } from './vllm-pd/sequential';

/** What vLLM EPD hands the P→D part after encoding. */
export interface ConsumerHandoff {
  /** The body P/PD and D are built from (media rewritten, `ec_transfer_params` added), instead of the client's. */
  readonly body: Record<string, unknown>;
}

/**
 * What one gateway learns about its vLLM prefills across requests: the DP rank cycle of Mooncake prefills and the
 * coordinates of NIXL push prefills. One per connector instance (connectors are built once per gateway).
 */
export class VllmPdState {
  readonly ranks = new DpRankCycle();
  readonly push = new PushCoordinates();
}

/**
 * vLLM prefill → decode (docs/protocols/vllm.md), per the ModelServer's KV connector and, for Mooncake, per prefill:
 * - NIXL pull, LMCache, plain `http`, vllm-ascend's Mooncake: sequential, the prefill's `kv_transfer_params` relayed
 *   to the decode byte for byte;
 * - upstream vLLM's Mooncake: concurrent, with a router-made `transfer_id` and the engine id of the prefill's DP rank;
 * - NIXL push: concurrent once the prefill's coordinates are known from one of its answers.
 */
export class VllmPdConnector implements Connector<EngineRequest> {
  readonly name: ConnectorName;
  readonly #state = new VllmPdState();

  constructor(name: ConnectorName) {
    this.name = name;
  }

  attempt(ctx: EngineRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    return runVllmPrefillDecode(ctx, attempt, index, run, this.#state);
  }

  fallback(ctx: EngineRequest, failure: UpstreamError, failed: ReadonlySet<string>): Attempt | undefined {
    return decodeOnlyFallback(ctx, failure, failed);
  }
}

/**
 * Every prefill try failed and the KV connector lets a decode prefill itself (`kv_transfer_params` absent: vLLM's
 * connectors then run the prefill locally, docs/reliability.md): the best decode of the decision that has not
 * failed, alone. Undefined for a failure of another stage or without the shortcut.
 */
export function decodeOnlyFallback(ctx: EngineRequest, failure: UpstreamError, failed: ReadonlySet<string>): Attempt | undefined {
  if (failure.stage !== 'prefill' || ctx.routing.server.shortcuts?.skipPrefill !== true) return undefined;
  const decode = ctx.proxy.attempts.find((a) => !failed.has(a.endpoint.key))?.endpoint;
  return decode === undefined ? undefined : { endpoint: decode };
}

/**
 * The P→D part shared by vLLM PD and vLLM EPD. An EPD attempt that names its consumer's DP rank sends it to the
 * consumer (the prefill, else the final leg) as `X-data-parallel-rank`.
 */
export async function runVllmPrefillDecode(
  ctx: EngineRequest,
  attempt: Attempt,
  index: number,
  run: LegRunner,
  state: VllmPdState,
  handoff?: ConsumerHandoff,
): Promise<void> {
  const server = ctx.routing.server;
  const input: PdInput = {
    body: run.legBody(handoff?.body ?? ctx.body),
    ...(attempt.consumerDpRank !== undefined ? { consumerRank: attempt.consumerDpRank } : {}),
  };
  const kv = server.kv;
  const prefill = attempt.prefill;
  if (prefill !== undefined && kv?.type === 'mooncake' && mooncakeFlowOf(kv, prefill) === 'concurrent') {
    await runMooncakeConcurrent(ctx, attempt, index, run, input, state.ranks);
    return;
  }
  if (prefill !== undefined && kv?.type === 'nixl' && kv.push) {
    await runNixlPush(ctx, attempt, index, run, input, state.push);
    return;
  }
  // Only the connectors whose prefill must return params (NIXL, vllm-ascend's Mooncake) report a prefill that did not:
  // LMCache moves KV through its own store and answers without them.
  const expectParams = kv?.type === 'nixl' || kv?.type === 'mooncake';
  await runSequentialPd(ctx, attempt, index, run, input, server.relayKvParams, expectParams && server.relayKvParams);
}
