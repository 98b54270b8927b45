import type { EndpointRef } from '@triad/bus';
import { EcHandoffError, UpstreamError, isRetryable, type EcProfile, type EngineRequest } from '@triad/request';
import { encoderBody } from '../request-bodies';
import { FanOut } from '../fan-out';
import type { Attempt, BufferedAnswer, Connector, LegRunner } from '../types';
import { consumerBody, type HandedOffItem } from './vllm-epd/consumer-body';
import { matchEncoderAnswer, type SentItem } from './vllm-epd/encoder-answer';
import { groupItems, itemUuid, newTransferId, type EncoderGroup } from './vllm-epd/ec-items';
import { VllmPdState, decodeOnlyFallback, runVllmPrefillDecode, type ConsumerHandoff } from './vllm-pd-connector';

const ENCODER_PATH = '/v1/chat/completions';

/** Settings of a vLLM EPD server that names no `ecConnector` (vLLM's example connector, no rewrite). */
const DEFAULT_EC: EcProfile = Object.freeze({
  connector: 'shared-storage',
  push: false,
  mmEmbeds: false,
  maxEncoderBatch: 16,
  reencodeAttempts: 1,
});

function encoderRequestId(parent: string, item: number): string {
  return `${parent}:${item}:${Math.floor(Math.random() * 0x1000000)
    .toString(16)
    .padStart(6, '0')}`;
}

/** The outcome of one encode run: the consumer body every later leg gets, and whom the encoders pushed to. */
interface Encoded {
  readonly body: Record<string, unknown>;
  /** Push connectors: the consumer and rank the items were pushed to; the run serves one P/D try only. */
  readonly pushedTo: string | undefined;
}

/**
 * The consumer encodes the client's media itself (the encode stage fell back, or the prefill did and the decode is
 * served as an aggregated pod): no hand-off body, no re-encode.
 */
const LOCAL: Encoded = Object.freeze({ body: {}, pushedTo: undefined });

/** Encode runs of requests in flight (per-request state of this stateless connector). */
const encodedByRequest = new WeakMap<EngineRequest, Encoded>();

/**
 * vLLM E→P→D and E→PD (docs/protocols/vllm.md, *Encoder fan-out*). Media items go to the encoders the scheduler
 * chose: images bound for the same encoder in one request (at most `ecConnector.maxEncoderBatch`), audio and video
 * alone, every part with a `uuid`, the client's processing kwargs, and for a push connector (Mooncake)
 * `ec_transfer_params {consumer_zmq, ec_items:[{transfer_id}]}` naming the attempt's consumer and DP rank, with fresh
 * transfer ids on every try. The encoders' answers are matched to the items; P/PD and D get the rewritten body
 * (`*_embeds` references when `enableMmEmbeds`) with the encoder entries in `ec_transfer_params`, and the consumer
 * `X-data-parallel-rank` when it has DP > 1. Pull and shared-storage connectors encode once, before the attempt loop;
 * a push connector encodes per P/D try; with every connector a P/D 500 before the first byte re-encodes and runs P/D
 * again on the same pods (`reencodeAttempts`), as vLLM's newest EPD proxy does.
 */
export class VllmEpdConnector implements Connector<EngineRequest> {
  readonly name = 'vllm-epd' as const;
  readonly #pd = new VllmPdState();

  async prepare(ctx: EngineRequest, run: LegRunner): Promise<void> {
    const ec = ctx.routing.server.ec ?? DEFAULT_EC;
    // A push connector encodes inside each attempt: what it pushes goes to that attempt's consumer.
    if (!encodesRemotely(ctx) || ec.push) return;
    try {
      encodedByRequest.set(ctx, await encodeAll(ctx, ec, undefined, run));
    } catch (err) {
      if (!encoderStageDown(ctx, err)) throw err;
      // Every try of an item failed and the EC consumer encodes what it was not handed: it gets the client's media.
      encodedByRequest.set(ctx, LOCAL);
      ctx.result.stageFallbacks.push({ stage: 'encode', reason: 'all_failed' });
      run.retrying(0, err);
    }
  }

  fallback(ctx: EngineRequest, failure: UpstreamError, failed: ReadonlySet<string>): Attempt | undefined {
    // A consumer without an EC control address is a deployment error to surface, not a prefill stage that is down.
    if (failure instanceof EcHandoffError && failure.reason === 'missing_consumer_address') return undefined;
    const decodeOnly = decodeOnlyFallback(ctx, failure, failed);
    // The decode is served as an aggregated pod: it gets the client's media and encodes them itself.
    if (decodeOnly !== undefined && encodesRemotely(ctx)) encodedByRequest.set(ctx, LOCAL);
    return decodeOnly;
  }

  async attempt(ctx: EngineRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    const ec = ctx.routing.server.ec ?? DEFAULT_EC;
    const media = encodesRemotely(ctx);
    for (let reencode = 0; ; reencode++) {
      let encoded = encodedByRequest.get(ctx);
      if (encoded === LOCAL) {
        await runVllmPrefillDecode(ctx, attempt, index, run, this.#pd);
        return;
      }
      if (media && (encoded === undefined || encoded.pushedTo !== undefined)) {
        encoded = await encodeAll(ctx, ec, attempt, run);
        encodedByRequest.set(ctx, encoded);
      }
      // A consumer that cannot read its encoder output fails with a 500, also as the first event of a stream it opened
      // (the leg fails such a stream as the 500 it stands for).
      const handoff: ConsumerHandoff | undefined = encoded === undefined ? undefined : { body: encoded.body };
      if (encoded?.pushedTo !== undefined) encodedByRequest.delete(ctx); // what was pushed is consumed by this try
      try {
        await runVllmPrefillDecode(ctx, attempt, index, run, this.#pd, handoff);
        return;
      } catch (err) {
        // vLLM's newest EPD proxy re-encodes after a consumer 500 whatever the EC connector: the encoder output a
        // consumer could not read (a push that never came, an entry evicted from shared storage, a pull refused) is
        // produced again, with fresh transfer ids, before P/D run again on the same pods.
        if (!media || !isConsumer500(err) || ctx.result.firstByteAt > 0) throw err;
        const lost = outputLostError(err, attempt, reencode, ec.push);
        if (reencode >= ec.reencodeAttempts) throw lost;
        run.retrying(index, lost);
        if (!ec.push) encodedByRequest.set(ctx, await encodeAll(ctx, ec, undefined, run));
      }
    }
  }
}

/**
 * Whether this request's media go to the encoders. Not when the scheduler chose a local encode (per-request
 * disaggregation): the consumer gets the client's media as they are and encodes them itself, as an aggregated
 * engine would (docs/scheduler.md, *Per-request disaggregation*).
 */
function encodesRemotely(ctx: EngineRequest): boolean {
  return ctx.proxy.media.length > 0 && ctx.proxy.decision.disaggregation?.encode !== 'local';
}

/**
 * Whether an encode failure means the stage is down for this request (every try of an item failed with a retryable
 * error, the retry policy allowing retries) and the EC consumer can encode for itself.
 */
function encoderStageDown(ctx: EngineRequest, err: unknown): err is UpstreamError {
  const server = ctx.routing.server;
  return isRetryable(err) && err.stage === 'encode' && server.shortcuts?.localEncode === true && server.retry.retries > 0;
}

/** A prefill or decode answered 500 (or opened its stream with an error event): how vLLM reports an undelivered push. */
function isConsumer500(err: unknown): err is UpstreamError {
  return err instanceof UpstreamError && (err.stage === 'prefill' || err.stage === 'decode') && err.status === 500;
}

function outputLostError(err: UpstreamError, attempt: Attempt, reencodes: number, push: boolean): EcHandoffError {
  const consumer = attempt.prefill ?? attempt.endpoint;
  const tail = reencodes > 0 ? ` (after ${reencodes} re-encode${reencodes > 1 ? 's' : ''})` : '';
  const meaning = push
    ? `with a push EC connector this means the encoder output pushed to the ${err.stage} on ${consumer.key} did not arrive`
    : `the ${err.stage} on ${consumer.key} could not read the encoder output (or failed otherwise)`;
  return new EcHandoffError(push ? 'push_timeout' : 'output_lost', `${err.message}${tail}; ${meaning}`, err, true, err);
}

/** `tcp://host:port` of the consumer's DP rank the decision named, or an error naming the pod. */
function consumerAddress(ctx: EngineRequest, attempt: Attempt): { key: string; zmq: string } {
  const consumer: EndpointRef = attempt.prefill ?? attempt.endpoint;
  const rank = attempt.consumerDpRank ?? 0;
  const zmq = consumer.ecControlAddresses?.[rank];
  if (zmq === undefined) {
    const stage = attempt.prefill !== undefined ? 'prefill' : 'decode';
    throw new EcHandoffError(
      'missing_consumer_address',
      `${stage} on ${consumer.key} has no EC control address for DP rank ${rank}, which the ` +
        `${ctx.routing.server.ec?.connector ?? 'push'} EC connector needs for ${ctx.proxy.media.length} media item(s) (pod annotation triad.io/ec-control-port or ` +
        'triad.io/ec-control-addresses)',
      { stage, endpoint: consumer.key, item: 0, status: 0 },
      true,
    );
  }
  return { key: `${consumer.key}#${rank}`, zmq };
}

/**
 * Runs every encoder group concurrently and builds the consumer body. The groups stand or fall together: the first
 * failure aborts the other groups' legs and stops their tries, and the run settles only once every group has.
 */
async function encodeAll(ctx: EngineRequest, ec: EcProfile, attempt: Attempt | undefined, run: LegRunner): Promise<Encoded> {
  const target = ec.push && attempt !== undefined ? consumerAddress(ctx, attempt) : undefined;
  // Every item's encoder is looked up before the first leg is sent: a decision that lacks one fails with nothing in flight.
  const groups = groupItems(ctx.proxy.media, ctx.proxy.decision.encoders, ec.maxEncoderBatch);
  const items: HandedOffItem[] = new Array<HandedOffItem>(ctx.proxy.media.length);
  const fan = new FanOut();
  await fan.all(groups.length, (i) => encodeGroup(ctx, groups[i], target?.zmq, run, fan, items));
  return { body: consumerBody(ctx.body, items, ec.mmEmbeds, ec.push), pushedTo: target?.key };
}

/** One encoder request for a group, retried on the alternates of its first item; fills the group's `items`. */
async function encodeGroup(
  ctx: EngineRequest,
  group: EncoderGroup,
  consumerZmq: string | undefined,
  run: LegRunner,
  fan: FanOut,
  items: HandedOffItem[],
): Promise<void> {
  const server = ctx.routing.server;
  const first = group.parts[0].index;
  const videoWithAudio = hasUseAudioInVideo(ctx.body);
  const tries = Math.min(1 + group.choice.alternates.length, 1 + server.retry.retries);
  for (let t = 0; ; t++) {
    if (fan.failure !== undefined) throw fan.failure;
    const endpoint = t === 0 ? group.choice.endpoint : group.choice.alternates[t - 1];
    // Fresh transfer ids on every try: a push of an earlier try must never be taken for this one.
    const sent: SentItem[] = group.parts.map((part) => ({
      index: part.index,
      uuid: itemUuid(part),
      transferId: consumerZmq === undefined ? undefined : newTransferId(),
      videoWithAudio: videoWithAudio && part.modality === 'video',
    }));
    let answer: BufferedAnswer;
    try {
      answer = await fan.track(
        run.buffered({
          stage: 'encode',
          endpoint,
          item: first,
          attempt: t,
          body: encoderBody(ctx.body, group.parts, sent, consumerZmq),
          requestId: encoderRequestId(ctx.id, first),
          timeoutMs: server.timeouts.encodeMs,
          path: ENCODER_PATH,
        }),
      );
    } catch (err) {
      // A sibling's failure cancelled this group: not a reason to try another encoder.
      if (fan.failure !== undefined || t + 1 >= tries || !isRetryable(err)) throw err;
      run.retrying(t, err);
      await run.pause(server.retry.intervalMs);
      continue;
    }
    const encoded = matchEncoderAnswer(answer.body, sent, endpoint);
    group.parts.forEach((part, i) => {
      const s = sent[i];
      items[part.index] = { part, uuid: s.uuid, transferId: s.transferId, encoded: encoded[i] };
    });
    return;
  }
}

function hasUseAudioInVideo(body: Record<string, unknown>): boolean {
  const kwargs = body['mm_processor_kwargs'];
  return kwargs !== null && typeof kwargs === 'object' && (kwargs as Record<string, unknown>)['use_audio_in_video'] === true;
}
