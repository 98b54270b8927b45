import { ErrorCode } from '@triad/errors';
import { SchedulingError, sampleCount, type ConnectorName, type EngineRequest } from '@triad/request';
import { upstreamHttpError } from '../errors';
import { FanOut } from '../fan-out';
import { mergeSampleAnswers, SampleStreamError, SampleStreamMerger, singleSampleBody } from '../parallel-samples';
import { clientPinsDpRank, finalLegBody, sglangBody } from '../request-bodies';
import type { Attempt, Connector, EndpointRef, LegHandle, LegRunner, LegSpec } from '../types';

/** The legs of one prefill/decode pair, and how to report their hand-off as stranded. */
interface Pair {
  readonly prefill: LegSpec;
  readonly decode: LegSpec;
  readonly strand: (failed: 'prefill' | 'decode', peerAborted: boolean) => void;
}

/** Sample `j`'s `x-request-id`: the request's with `-s<j>`, so engine logs still lead back to the request. */
function sampleRequestId(id: string, sample: number): string {
  return `${id}-s${sample}`;
}

/** A sample's stream that carried an error event (or could not be read) fails as its decode leg. */
function sampleFailure(decode: LegSpec, err: unknown): Error {
  const status = err instanceof SampleStreamError ? err.status : 500;
  const message = err instanceof Error ? err.message : String(err);
  return upstreamHttpError({ stage: 'decode', endpoint: decode.endpoint.key, item: -1, status }, `error event in its stream: ${message}`);
}

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
    const samples = sampleCount(ctx.body, ctx.routing.upstreamPath ?? ctx.path);
    if (samples > 1) return this.#samples(ctx, attempt, index, run, prefill, samples);
    const pair = this.#pair(ctx, attempt, index, run, prefill, run.legBody(ctx.body));
    const p = run.drained(pair.prefill);
    if (ctx.stream) {
      await together(p, run.relay(pair.decode), pair.strand);
      return;
    }
    // Non-stream: the answer goes out only once the prefill succeeded too, so a prefill failure stays retryable.
    const [, answer] = await together(p, run.buffered(pair.decode), pair.strand);
    run.respond(answer);
  }

  /**
   * The legs of one prefill/decode pair for `body`, with a fresh room (and DP ranks) of their own. `requestId`: the
   * `x-request-id` of both legs (a sample's own, so no engine sees two live requests with one id).
   */
  #pair(
    ctx: EngineRequest,
    attempt: Attempt,
    index: number,
    run: LegRunner,
    prefill: EndpointRef,
    body: Record<string, unknown>,
    requestId = ctx.id,
  ): Pair {
    const pick = ctx.proxy.dpRank;
    const ranks = pick === undefined ? undefined : { prefill: pick(prefill, 'prefill'), decode: pick(attempt.endpoint, 'decode') };
    const { prefillBody, decodeBody } = sglangBody(body, ctx.proxy.injectUsage, prefill, ranks);
    const timeouts = ctx.routing.server.timeouts;
    return {
      prefill: {
        stage: 'prefill',
        endpoint: prefill,
        item: -1,
        attempt: index,
        body: prefillBody,
        requestId,
        timeoutMs: timeouts.prefillMs,
      },
      decode: {
        stage: 'decode',
        endpoint: attempt.endpoint,
        item: -1,
        attempt: index,
        body: decodeBody,
        requestId,
        timeoutMs: timeouts.firstByteMs,
      },
      strand: (failed, peerAborted) => run.kvStranded({ engine: 'SGLang', prefill, decode: attempt.endpoint, failed, peerAborted }),
    };
  }

  /**
   * `n > 1`: SGLang sends every sample of a request on one room, so under PD the samples never pair (they hang until
   * the bootstrap timeout). Instead `n` single-sample pairs, each with its own room, on this try's prefill and
   * decode; their answers are merged into the one the client asked for (parallel-samples.ts). The samples stand or
   * fall together: the first failure aborts the others' legs and fails the try, so no partial answer goes out as a
   * success (a stream already under way ends with an error event).
   */
  async #samples(ctx: EngineRequest, attempt: Attempt, index: number, run: LegRunner, prefill: EndpointRef, n: number): Promise<void> {
    const body = singleSampleBody(run.legBody(ctx.body));
    const group = new FanOut();
    if (!ctx.stream) {
      const answers = await group.all(n, (sample) => {
        const pair = this.#pair(ctx, attempt, index, run, prefill, body, sampleRequestId(ctx.id, sample));
        const p = run.drained(pair.prefill);
        const d = run.buffered(pair.decode);
        void group.track(p);
        void group.track(d);
        return together(p, d, pair.strand).then(([, answer]) => answer);
      });
      const first = answers[0];
      const merged = mergeSampleAnswers(answers.map((a) => a.body));
      run.respond({ status: first.status, contentType: first.contentType, body: merged.body }, merged.usage);
      return;
    }
    const merger = new SampleStreamMerger(n, ctx.proxy.clientWantsUsage);
    await group.all(n, (sample) => {
      const pair = this.#pair(ctx, attempt, index, run, prefill, body, sampleRequestId(ctx.id, sample));
      const p = run.drained(pair.prefill);
      const d: LegHandle<void> = run.tapped(pair.decode, (chunk) => {
        let merged: Buffer;
        try {
          merged = merger.push(sample, chunk);
        } catch (err) {
          d.abort(sampleFailure(pair.decode, err));
          return;
        }
        if (merged.length > 0) run.writeStream(merged);
      });
      void group.track(p);
      void group.track(d);
      return together(p, d, pair.strand);
    });
    run.endStream(merger.end(), merger.usage);
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
