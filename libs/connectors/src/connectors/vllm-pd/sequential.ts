import type { EngineRequest } from '@triad/request';
import { topLevelValue, type JsonFragments } from '../../json-text';
import { finalLegBody, vllmPrefillBody } from '../../request-bodies';
import type { Attempt, BufferedAnswer, LegRunner, LegSpec } from '../../types';
import type { PdInput } from './mooncake';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Whether a decode took the KV its prefill holds (its first byte came). */
class KvHandoff {
  isTaken = false;
  /** The decode leg's `onFirstByte`; made once per hand-off, not named per request (`keepNames`) as an inline arrow is. */
  readonly taken: () => void = takenBy(this);
}

function takenBy(handoff: KvHandoff): () => void {
  return () => {
    handoff.isTaken = true;
  };
}

/**
 * vLLM prefill → decode in sequence (the NIXL toy proxy's flow; also vllm-ascend's Mooncake connector, LMCache and
 * plain `http`). Prefill gets one token, no stream and, with `kvParams`, `kv_transfer_params` asking it to keep the
 * blocks (`true`: the toy proxy's params, a string: those raw params); decode gets the original body plus the
 * prefill's returned `kv_transfer_params` byte for byte. Both get the same `x-request-id`. A KV connector's prefill
 * that answers without params (the prefill does not run the connector the ModelServer names) is reported
 * (`kvParamsMissing`) when `expectParams`: its decode will prefill the whole prompt again. An attempt without a
 * prefill endpoint (E→PD) goes straight to decode. Resolves to the prefill's answer (undefined without one).
 */
export async function runSequentialPd(
  ctx: EngineRequest,
  attempt: Attempt,
  index: number,
  run: LegRunner,
  input: PdInput,
  kvParams: boolean | string,
  expectParams = kvParams !== false,
): Promise<BufferedAnswer | undefined> {
  const server = ctx.routing.server;
  const body = input.body;
  const rank = input.consumerRank === undefined ? undefined : { 'X-data-parallel-rank': String(input.consumerRank) };
  let kv: string | undefined;
  let answer: BufferedAnswer | undefined;
  // The prefill and the decode body differ in a few top-level fields: the messages are serialized once for both.
  const fragments: JsonFragments | undefined = attempt.prefill !== undefined ? new Map() : undefined;
  if (attempt.prefill !== undefined) {
    const prefill: Mutable<LegSpec> = {
      stage: 'prefill',
      endpoint: attempt.prefill,
      item: -1,
      attempt: index,
      body: vllmPrefillBody(body, kvParams, fragments),
      requestId: ctx.id,
      timeoutMs: server.timeouts.prefillMs,
    };
    if (rank !== undefined) prefill.headers = rank;
    answer = await run.buffered(prefill).promise;
    if (kvParams !== false) {
      const raw = topLevelValue(answer.body.toString('utf8'), 'kv_transfer_params');
      // Missing or null params: decode runs a local prefill, as vLLM's proxies do.
      if (raw !== undefined && raw !== 'null') kv = raw;
      else if (expectParams) run.kvParamsMissing(attempt.prefill);
    }
  }
  const consumer = attempt.prefill === undefined;
  // From here the prefill holds KV for this request until a decode reads it. The decode's first byte says one has
  // (vLLM produces no token before the KV is loaded); a decode leg that ends before it leaves the KV stranded.
  const handoff = kv !== undefined ? new KvHandoff() : undefined;
  // One object, its optional fields set in place (no spread of a temporary object per field).
  const decode: Mutable<LegSpec> = {
    stage: 'decode',
    endpoint: attempt.endpoint,
    item: -1,
    attempt: index,
    body: finalLegBody(body, ctx.proxy.injectUsage, kv, undefined, fragments),
    requestId: ctx.id,
    timeoutMs: server.timeouts.firstByteMs,
  };
  if (consumer && rank !== undefined) decode.headers = rank;
  if (handoff !== undefined) decode.onFirstByte = handoff.taken;
  try {
    await run.relay(decode).promise;
  } catch (err) {
    if (kv !== undefined && !handoff?.isTaken && attempt.prefill !== undefined) {
      run.kvStranded({
        engine: 'vLLM',
        prefill: attempt.prefill,
        decode: attempt.endpoint,
        failed: 'decode',
        release: { kvParams: kv, body },
      });
    }
    throw err;
  }
  return answer;
}
