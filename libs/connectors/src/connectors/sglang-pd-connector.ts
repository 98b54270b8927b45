import { ErrorCode } from '@triad/errors';
import { SchedulingError, type ConnectorName, type EngineRequest } from '@triad/request';
import { clientPinsDpRank, finalLegBody, sglangBody } from '../request-bodies';
import type { Attempt, Connector, LegHandle, LegRunner } from '../types';

/**
 * SGLang PD, and SGLang EPD (the same against the language-only prefill, which calls the encoders registered with
 * it; the gateway never plans or calls SGLang encoders). The body with `bootstrap_host/port/room` goes to prefill
 * and decode concurrently — the decode waits for the prefill's bootstrap server — and the decode's answer is the
 * client's. The prefill answer is drained and dropped, but a prefill failure fails the attempt (and aborts the
 * decode); a decode failure aborts the prefill. Each try gets a fresh room and, on engines with DP ranks, fresh
 * rank hints. The protocol: docs/protocols/sglang.md.
 */
export class SglangPdConnector implements Connector<EngineRequest> {
  readonly name: ConnectorName;

  constructor(name: ConnectorName) {
    this.name = name;
  }

  async attempt(ctx: EngineRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    const prefill = attempt.prefill;
    // SGLang E→PD: one language-only server prefills and decodes (its registry holds the encoders): one hop.
    if (prefill === undefined && this.name === 'sglang-epd') return this.#single(ctx, attempt, index, run);
    if (prefill === undefined) {
      // The decision's endpoints are in the access log; a client's message never names one.
      throw new SchedulingError(ErrorCode.SchedNoPrefillPair, 'SGLang PD needs a prefill endpoint, and the decision gave its decode none');
    }
    const pick = ctx.proxy.dpRank;
    const ranks = pick === undefined ? undefined : { prefill: pick(prefill, 'prefill'), decode: pick(attempt.endpoint, 'decode') };
    const { prefillBody, decodeBody } = sglangBody(run.legBody(ctx.body), ctx.proxy.injectUsage, prefill, ranks);
    const timeouts = ctx.routing.server.timeouts;
    const p = run.drained({
      stage: 'prefill',
      endpoint: prefill,
      item: -1,
      attempt: index,
      body: prefillBody,
      requestId: ctx.id,
      timeoutMs: timeouts.prefillMs,
    });
    const decode = {
      stage: 'decode' as const,
      endpoint: attempt.endpoint,
      item: -1,
      attempt: index,
      body: decodeBody,
      requestId: ctx.id,
      timeoutMs: timeouts.firstByteMs,
    };
    const strand = (failed: 'prefill' | 'decode', peerAborted: boolean) => {
      run.kvStranded({ engine: 'SGLang', prefill, decode: attempt.endpoint, failed, peerAborted });
    };
    if (ctx.stream) {
      await together(p, run.relay(decode), strand);
      return;
    }
    // Non-stream: the answer goes out only once the prefill succeeded too, so a prefill failure stays retryable.
    const [, answer] = await together(p, run.buffered(decode), strand);
    run.respond(answer);
  }

  #single(ctx: EngineRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    const pick = ctx.proxy.dpRank;
    const rank = pick !== undefined && !clientPinsDpRank(ctx.body, ctx.headers) ? pick(attempt.endpoint, 'decode') : undefined;
    return run.relay({
      stage: 'decode',
      endpoint: attempt.endpoint,
      item: -1,
      attempt: index,
      requestId: ctx.id,
      body: finalLegBody(run.legBody(ctx.body), ctx.proxy.injectUsage, undefined, rank),
      timeoutMs: ctx.routing.server.timeouts.firstByteMs,
    }).promise;
  }
}

/**
 * Resolves when both legs (prefill `a`, decode `b`) succeed; the first failure aborts the other leg and rejects with
 * that failure. When the prefill had not finished by then, the pair's KV transfer did not complete: `stranded` is
 * told which leg failed and whether the other was still in flight (so its abort made that engine let go of the
 * room: a decode's pre-allocated blocks, a prefill's bootstrap slot).
 */
function together<A, B>(
  a: LegHandle<A>,
  b: LegHandle<B>,
  stranded: (failed: 'prefill' | 'decode', peerAborted: boolean) => void,
): Promise<[A, B]> {
  return new Promise<[A, B]>((resolve, reject) => {
    let left = 2;
    let va: A;
    let vb: B;
    let aDone = false;
    let bDone = false;
    let failed = false;
    const fail = (which: 'prefill' | 'decode', other: LegHandle<unknown>, otherDone: boolean, err: Error) => {
      if (failed) return;
      failed = true;
      other.abort(err);
      if (!aDone || which === 'prefill') stranded(which, !otherDone);
      reject(err);
    };
    a.promise.then(
      (v) => {
        aDone = true;
        va = v;
        if (--left === 0) resolve([va, vb]);
      },
      (err: Error) => {
        aDone = true;
        fail('prefill', b, bDone, err);
      },
    );
    b.promise.then(
      (v) => {
        bDone = true;
        vb = v;
        if (--left === 0) resolve([va, vb]);
      },
      (err: Error) => {
        bDone = true;
        fail('decode', a, aDone, err);
      },
    );
  });
}
