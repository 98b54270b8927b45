// A LegRunner without network: connectors run against a scripted engine, so their protocol (which legs, in
// which order, with which bodies, what happens on failures) is testable without NATS, sockets or sims.
import type { EndpointRef, Stage } from '@triad/bus';
import type { UpstreamError, Usage } from '@triad/request';
import { upstreamHttpError } from '../errors';
import type { BufferedAnswer, KvStrandReport, LegHandle, LegRunner, LegSpec } from '../types';

/** How the connector asked for a leg: buffer its answer, relay it to the client, drain it, or tap it. */
export type FakeLegMode = 'buffered' | 'relay' | 'drained' | 'tapped';

/** A 2xx answer of the fake engine (defaults: 200, `application/json`, `{}`); an object body is sent as JSON. */
export interface FakeReply {
  readonly status?: number;
  readonly contentType?: string;
  readonly body?: string | Record<string, unknown>;
}

/**
 * What the fake engine does with a leg: answer it, fail it with an error (use {@link engineError} for an
 * engine's non-2xx answer), or `'hang'`: never settle unless the leg is aborted.
 */
export type FakeOutcome = FakeReply | Error | 'hang';

/** The scripted engine: decides each leg's outcome (may take its time, e.g. to let another leg go first). */
export type FakeEngine = (spec: LegSpec, mode: FakeLegMode) => FakeOutcome | Promise<FakeOutcome>;

/** One leg a connector sent. */
export interface FakeLeg {
  readonly mode: FakeLegMode;
  readonly spec: LegSpec;
  /** The abort reason when the connector (or the test) aborted the leg before it settled. */
  readonly abortedWith: Error | undefined;
  /** The leg's body, parsed. */
  json(): Record<string, unknown>;
}

/**
 * What reached the client: a relayed final leg, a buffered answer the connector wrote with `respond`, or a stream it
 * composed (`writeStream` parts up to `endStream`).
 */
export interface ClientAnswer {
  readonly via: 'relay' | 'respond' | 'stream';
  readonly status: number;
  readonly body: string;
}

/** The error a leg fails with when its engine answers `status` (retryable for 5xx and 429, as the real legs). */
export function engineError(spec: LegSpec, status: number, message = `HTTP ${status}`): UpstreamError {
  return upstreamHttpError({ stage: spec.stage, endpoint: spec.endpoint.key, item: spec.item, status }, message);
}

class RecordedLeg implements FakeLeg {
  readonly mode: FakeLegMode;
  readonly spec: LegSpec;
  abortedWith: Error | undefined = undefined;

  constructor(mode: FakeLegMode, spec: LegSpec) {
    this.mode = mode;
    this.spec = spec;
  }

  json(): Record<string, unknown> {
    const parsed: unknown = JSON.parse(this.spec.body);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new Error(`leg body is not a JSON object: ${this.spec.body}`);
    }
    return { ...parsed };
  }
}

const HANG = new Promise<never>(() => undefined);

/**
 * A {@link LegRunner} over a {@link FakeEngine}: records every leg (`legs`), what reached the client
 * (`answers`), the connector's own retries (`retries`) and pauses (`pauses`). Each handle settles once, with the
 * engine's outcome or with the reason it was aborted.
 *
 * ```ts
 * const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? { body: { kv_transfer_params: {...} } } : {}));
 * await connector.attempt(ctx, ctx.proxy.decision.attempts[0], 0, run);
 * expect(run.legsOf('decode')[0].json()).toMatchObject({ kv_transfer_params: {...} });
 * ```
 */
export class FakeLegRunner implements LegRunner {
  readonly legs: FakeLeg[] = [];
  readonly answers: ClientAnswer[] = [];
  readonly retries: { readonly attempt: number; readonly error: Error }[] = [];
  readonly pauses: number[] = [];
  /** KV hand-offs the connector reported as not taken. */
  readonly stranded: KvStrandReport[] = [];
  /** Prefills the connector reported as answering without the `kv_transfer_params` their connector returns. */
  readonly paramsMissing: EndpointRef[] = [];
  readonly #engine: FakeEngine;

  constructor(engine: FakeEngine = () => ({})) {
    this.#engine = engine;
  }

  /** The legs sent for one stage, in order. */
  legsOf(stage: Stage): FakeLeg[] {
    return this.legs.filter((l) => l.spec.stage === stage);
  }

  buffered(spec: LegSpec): LegHandle<BufferedAnswer> {
    return this.#send('buffered', spec, (answer) => answer);
  }

  relay(spec: LegSpec): LegHandle<void> {
    return this.#send('relay', spec, (answer) => {
      // The whole answer arrives at once here: its first byte is also its last.
      spec.onFirstByte?.();
      this.answers.push({ via: 'relay', status: answer.status, body: answer.body.toString('utf8') });
    });
  }

  drained(spec: LegSpec): LegHandle<void> {
    return this.#send('drained', spec, () => undefined);
  }

  tapped(spec: LegSpec, onData: (chunk: Buffer) => void): LegHandle<void> {
    // The whole answer arrives as one chunk.
    return this.#send('tapped', spec, (answer) => onData(answer.body));
  }

  /** Token counts the connector gave with `respond`, when it gave any. */
  respondUsage: Usage | undefined;

  respond(answer: BufferedAnswer, usage?: Usage): void {
    this.respondUsage = usage;
    this.answers.push({ via: 'respond', status: answer.status, body: answer.body.toString('utf8') });
  }

  /** The parts of the stream being composed (`writeStream`), until `endStream` makes them an answer. */
  #streamed: string[] = [];
  /** Token counts the connector gave with `endStream`. */
  streamUsage: Usage | undefined;

  writeStream(part: Buffer): void {
    this.#streamed.push(part.toString('utf8'));
  }

  endStream(tail: Buffer, usage: Usage | undefined): void {
    this.streamUsage = usage;
    this.answers.push({ via: 'stream', status: 200, body: this.#streamed.join('') + tail.toString('utf8') });
    this.#streamed = [];
  }

  retrying(attempt: number, error: Error): void {
    this.retries.push({ attempt, error });
  }

  pause(ms: number): Promise<void> {
    this.pauses.push(ms);
    return Promise.resolve();
  }

  kvStranded(report: KvStrandReport): void {
    this.stranded.push(report);
  }

  legBody(body: Record<string, unknown>): Record<string, unknown> {
    return body;
  }

  kvParamsMissing(prefill: EndpointRef): void {
    this.paramsMissing.push(prefill);
  }

  #send<T>(mode: FakeLegMode, spec: LegSpec, onAnswer: (answer: BufferedAnswer) => T): LegHandle<T> {
    const leg = new RecordedLeg(mode, spec);
    this.legs.push(leg);
    let settled = false;
    let fail: (reason: Error) => void = () => undefined;
    const promise = new Promise<T>((resolve, reject) => {
      fail = (reason) => {
        if (settled) return;
        settled = true;
        reject(reason);
      };
      Promise.resolve()
        .then(() => this.#engine(spec, mode))
        .then((outcome) => (outcome === 'hang' ? HANG : outcome))
        .then(
          (outcome) => {
            if (settled) return;
            if (outcome instanceof Error) return fail(outcome);
            // The answer is handed over before the leg settles, as the real legs do (a tapped leg's reader may abort it).
            const value = onAnswer(replyOf(outcome));
            if (settled) return;
            settled = true;
            resolve(value);
          },
          (err: unknown) => fail(err instanceof Error ? err : new Error(String(err))),
        );
    });
    return {
      promise,
      abort: (reason) => {
        if (settled) return;
        leg.abortedWith = reason;
        fail(reason);
      },
    };
  }
}

function replyOf(reply: FakeReply): BufferedAnswer {
  const body = reply.body === undefined ? '{}' : typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
  return { status: reply.status ?? 200, contentType: reply.contentType ?? 'application/json', body: Buffer.from(body) };
}
