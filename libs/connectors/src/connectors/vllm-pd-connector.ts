import type { ConnectorName, EngineRequest } from '@triad/request';
import { topLevelValue } from '../json-text';
import { finalLegBody, vllmPrefillBody } from '../request-bodies';
import type { Attempt, Connector, LegRunner } from '../types';

/**
 * vLLM prefill → decode, in sequence (docs/protocols/vllm.md). Prefill gets one token, no stream and, for the
 * NIXL/Mooncake/LMCache connectors, `kv_transfer_params.do_remote_decode`; decode gets the original body plus
 * the prefill's returned `kv_transfer_params` verbatim (byte for byte). Both get the same `x-request-id`. An
 * attempt without a prefill endpoint (E→PD) goes straight to decode.
 */
export class VllmPdConnector implements Connector<EngineRequest> {
  readonly name: ConnectorName;

  constructor(name: ConnectorName) {
    this.name = name;
  }

  attempt(ctx: EngineRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    return runVllmPrefillDecode(ctx, attempt, index, run);
  }
}

/** What vLLM EPD hands the P→D part after encoding. */
export interface ConsumerHandoff {
  /** The body P/PD and D are built from (media rewritten, `ec_transfer_params` added), instead of the client's. */
  readonly body: Record<string, unknown>;
  /** The consumer's stream fails like a 500 when its first event is an error (an undelivered push). */
  readonly leadingErrorEventFails: boolean;
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
  handoff?: ConsumerHandoff,
): Promise<void> {
  const server = ctx.routing.server;
  const relayKv = server.relayKvParams;
  const body = handoff?.body ?? ctx.body;
  const rank = attempt.consumerDpRank === undefined ? undefined : { 'X-data-parallel-rank': String(attempt.consumerDpRank) };
  let kvParams: string | undefined;
  if (attempt.prefill !== undefined) {
    const answer = await run.buffered({
      stage: 'prefill',
      endpoint: attempt.prefill,
      item: -1,
      attempt: index,
      body: vllmPrefillBody(body, relayKv),
      requestId: ctx.id,
      timeoutMs: server.timeouts.prefillMs,
      ...(rank !== undefined ? { headers: rank } : {}),
    }).promise;
    if (relayKv) {
      const raw = topLevelValue(answer.body.toString('utf8'), 'kv_transfer_params');
      // Missing or null params: decode runs a local prefill, as vLLM's proxies do.
      if (raw !== undefined && raw !== 'null') kvParams = raw;
    }
  }
  const consumer = attempt.prefill === undefined;
  // From here the prefill holds KV for this request until a decode reads it. The decode's first byte says one has
  // (vLLM produces no token before the KV is loaded); a decode leg that ends before it leaves the KV stranded.
  let taken = false;
  try {
    await run.relay({
      stage: 'decode',
      endpoint: attempt.endpoint,
      item: -1,
      attempt: index,
      body: finalLegBody(body, ctx.proxy.injectUsage, kvParams),
      requestId: ctx.id,
      timeoutMs: server.timeouts.firstByteMs,
      ...(consumer && rank !== undefined ? { headers: rank } : {}),
      ...(handoff?.leadingErrorEventFails === true ? { leadingErrorEventFails: true } : {}),
      ...(kvParams !== undefined ? { onFirstByte: () => (taken = true) } : {}),
    }).promise;
  } catch (err) {
    if (kvParams !== undefined && !taken && attempt.prefill !== undefined) {
      run.kvStranded({
        engine: 'vLLM',
        prefill: attempt.prefill,
        decode: attempt.endpoint,
        failed: 'decode',
        release: { kvParams, body },
      });
    }
    throw err;
  }
}
