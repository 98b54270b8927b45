import { ErrorCode } from '@triad/errors';
import { UpstreamError, type EngineRequest } from '@triad/request';
import type { Attempt, BufferedAnswer, EndpointRef, LegRunner, LegSpec } from '../../types';

/** What one concurrent vLLM P→D dispatch sends (bodies built by the flow: Mooncake, NIXL push). */
export interface ConcurrentLegs {
  readonly prefill: EndpointRef;
  readonly prefillBody: string;
  readonly decodeBody: string;
  /** The decode's `kv_transfer_params` (raw JSON), for a release leg when the decode never got the request. */
  readonly decodeKvParams: string;
  /** The body the decode body was built from (the client's, or EPD's rewritten one), for a release leg. */
  readonly baseBody: Record<string, unknown>;
  readonly prefillHeaders?: Readonly<Record<string, string>>;
  readonly decodeHeaders?: Readonly<Record<string, string>>;
  /** Sees the prefill's 2xx answer as soon as it arrives, whatever becomes of the decode. */
  readonly onPrefillAnswer?: (answer: BufferedAnswer) => void;
}

/** What a concurrent try resolves to when the prefill's answer did not come before the decode's. */
const NO_ANSWER: BufferedAnswer = Object.freeze({ status: 0, contentType: '', body: Buffer.alloc(0) });

/** A decode that never received its request: its engine cannot have told the prefill to let go of the KV. */
function neverReached(err: unknown): boolean {
  return err instanceof UpstreamError && err.code === ErrorCode.UpstreamConnect;
}

/**
 * Sends the prefill and the decode of one try at the same time, as the engines of these flows expect: the decode
 * waits inside its engine until the prefill's KV arrives. The prefill's answer is not relayed, but its failure is
 * the attempt's: before the decode's first byte (or, for a buffered answer, before it is written) it aborts the
 * decode and fails the try with the prefill's error, so the stage loop retries another pair — a decode left alone
 * would wait for KV that never comes, then fail or prefill the prompt itself. After the first byte the decode has
 * its KV (vLLM produces no token before the load finishes) and goes on; the prefill's failure still counts (its
 * leg reports it). A decode failure aborts a prefill still running. Resolves to the prefill's answer (empty when the
 * decode's came first).
 */
export function runConcurrentPd(
  ctx: EngineRequest,
  attempt: Attempt,
  index: number,
  run: LegRunner,
  legs: ConcurrentLegs,
): Promise<BufferedAnswer> {
  const timeouts = ctx.routing.server.timeouts;
  const prefill = run.buffered({
    stage: 'prefill',
    endpoint: legs.prefill,
    item: -1,
    attempt: index,
    body: legs.prefillBody,
    requestId: ctx.id,
    timeoutMs: timeouts.prefillMs,
    ...(legs.prefillHeaders !== undefined ? { headers: legs.prefillHeaders } : {}),
  });
  let firstByte = false;
  const decodeSpec: LegSpec = {
    stage: 'decode',
    endpoint: attempt.endpoint,
    item: -1,
    attempt: index,
    body: legs.decodeBody,
    requestId: ctx.id,
    timeoutMs: timeouts.firstByteMs,
    ...(legs.decodeHeaders !== undefined ? { headers: legs.decodeHeaders } : {}),
    onFirstByte: () => (firstByte = true),
  };
  const decode = ctx.stream ? run.relay(decodeSpec) : run.buffered(decodeSpec);

  return new Promise<BufferedAnswer>((resolve, reject) => {
    let prefillAnswer: BufferedAnswer | undefined;
    let decodeAnswer: BufferedAnswer | void | undefined;
    let prefillDone = false;
    let decodeDone = false;
    let failed = false;
    const finish = () => {
      if (failed || !decodeDone) return;
      // A decode that answered had its KV (it waits for it; a failed load fails it, and a prefill failure before
      // its answer aborted it): its answer goes out without waiting for the prefill's, and the stage loop then
      // aborts a prefill leg still open.
      if (!ctx.stream) run.respond(decodeAnswer as BufferedAnswer);
      resolve(prefillAnswer ?? NO_ANSWER);
    };
    prefill.promise.then(
      (answer) => {
        prefillDone = true;
        prefillAnswer = answer;
        legs.onPrefillAnswer?.(answer);
        finish();
      },
      (err: Error) => {
        prefillDone = true;
        if (failed) return;
        // The decode already streams from KV it loaded: the client's answer goes on.
        if (ctx.stream && firstByte) return;
        failed = true;
        const peerAborted = !decodeDone;
        decode.abort(err);
        run.kvStranded({ engine: 'vLLM', prefill: legs.prefill, decode: attempt.endpoint, failed: 'prefill', peerAborted });
        reject(err);
      },
    );
    decode.promise.then(
      (answer) => {
        decodeDone = true;
        decodeAnswer = answer;
        finish();
      },
      (err: Error) => {
        decodeDone = true;
        if (failed) return;
        failed = true;
        const peerAborted = !prefillDone;
        prefill.abort(err);
        if (!firstByte) {
          // A decode that received the request frees the prefill's KV itself when it ends (vLLM sends the prefill an
          // empty pull for a request aborted before it was scheduled); one that never got it cannot.
          const release = !peerAborted && neverReached(err) ? { kvParams: legs.decodeKvParams, body: legs.baseBody } : undefined;
          run.kvStranded({
            engine: 'vLLM',
            prefill: legs.prefill,
            decode: attempt.endpoint,
            failed: 'decode',
            peerAborted,
            ...(release !== undefined ? { release } : {}),
          });
        }
        reject(err);
      },
    );
  });
}
