import type { ConnectorName, ProxyRequest } from '@triad/request';
import { topLevelValue } from '../json-text';
import { finalLegBody, vllmPrefillBody } from '../request-bodies';
import type { Attempt, Connector, LegRunner } from '../types';

/**
 * vLLM prefill → decode, in sequence (docs/protocols/vllm.md). Prefill gets one token, no stream and, for the
 * NIXL/Mooncake/LMCache connectors, `kv_transfer_params.do_remote_decode`; decode gets the original body plus
 * the prefill's returned `kv_transfer_params` verbatim (byte for byte). Both get the same `x-request-id`. An
 * attempt without a prefill endpoint (E→PD) goes straight to decode.
 */
export class VllmPdConnector implements Connector {
  readonly name: ConnectorName;

  constructor(name: ConnectorName) {
    this.name = name;
  }

  attempt(ctx: ProxyRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    return runVllmPrefillDecode(ctx, attempt, index, run);
  }
}

/** The P→D part shared by vLLM PD and vLLM EPD. */
export async function runVllmPrefillDecode(ctx: ProxyRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
  const server = ctx.routing.server;
  const relayKv = server.relayKvParams;
  let kvParams: string | undefined;
  if (attempt.prefill !== undefined) {
    const answer = await run.buffered({
      stage: 'prefill',
      endpoint: attempt.prefill,
      item: -1,
      attempt: index,
      body: vllmPrefillBody(ctx.body, relayKv),
      requestId: ctx.id,
      timeoutMs: server.timeouts.prefillMs,
    }).promise;
    if (relayKv) {
      const raw = topLevelValue(answer.body.toString('utf8'), 'kv_transfer_params');
      // Missing or null params: decode runs a local prefill, as vLLM's proxies do.
      if (raw !== undefined && raw !== 'null') kvParams = raw;
    }
  }
  await run.relay({
    stage: 'decode',
    endpoint: attempt.endpoint,
    item: -1,
    attempt: index,
    body: finalLegBody(ctx.body, ctx.proxy.injectUsage, kvParams),
    requestId: ctx.id,
    timeoutMs: server.timeouts.firstByteMs,
  }).promise;
}
