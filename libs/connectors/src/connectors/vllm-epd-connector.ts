import type { EncoderChoice } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { SchedulingError, isRetryable, type MediaPart, type ProxyRequest } from '@triad/request';
import { FanOut } from '../fan-out';
import { encoderBody } from '../request-bodies';
import type { Attempt, Connector, LegRunner } from '../types';
import { runVllmPrefillDecode } from './vllm-pd-connector';

const ENCODER_PATH = '/v1/chat/completions';

function encoderRequestId(parent: string, item: number): string {
  return `${parent}:${item}:${Math.floor(Math.random() * 0x1000000).toString(16).padStart(6, '0')}`;
}

/**
 * vLLM E→P→D and E→PD (docs/protocols/vllm.md). Before the attempt loop, every media item goes to the encoder the
 * scheduler chose for it — one request per item, all concurrently, body holding only that item — with
 * `x-request-id parent:i:hex`; an item retries on its own alternates. All items must succeed or the request
 * fails naming the item, and nothing downstream runs: the first failed item cancels the others' legs and tries,
 * and the fan-out settles only when every item has. Every item's encoder is looked up before the first leg is
 * sent, so a decision that lacks one fails the request with nothing in flight. Text-only requests skip encode.
 * Then P→D as vLLM PD.
 */
export class VllmEpdConnector implements Connector {
  readonly name = 'vllm-epd' as const;

  async prepare(ctx: ProxyRequest, run: LegRunner): Promise<void> {
    const media = ctx.proxy.media;
    if (media.length === 0) return;
    const choices = ctx.proxy.decision.encoders;
    const planned = media.map((part) => choiceFor(choices, part.index));
    const group = new FanOut();
    await group.all(media.length, (i) => encodeItem(ctx, media[i] as MediaPart, planned[i] as EncoderChoice, run, group));
  }

  attempt(ctx: ProxyRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    return runVllmPrefillDecode(ctx, attempt, index, run);
  }
}

function choiceFor(choices: readonly EncoderChoice[], item: number): EncoderChoice {
  const direct = choices[item];
  if (direct !== undefined && direct.item === item) return direct;
  const found = choices.find((c) => c.item === item);
  if (found === undefined) throw new SchedulingError(
    ErrorCode.SchedNoEncoder, `no encoder was chosen for media item ${item}`, { stage: 'encode', item },
  );
  return found;
}

async function encodeItem(ctx: ProxyRequest, part: MediaPart, choice: EncoderChoice, run: LegRunner, group: FanOut): Promise<void> {
  const body = encoderBody(ctx.body, part);
  const server = ctx.routing.server;
  const tries = Math.min(1 + choice.alternates.length, 1 + server.retry.retries);
  for (let t = 0; ; t++) {
    const endpoint = t === 0 ? choice.endpoint : choice.alternates[t - 1];
    if (group.failure !== undefined) throw group.failure;
    try {
      await group.track(run.buffered({
        stage: 'encode',
        endpoint,
        item: part.index,
        attempt: t,
        body,
        requestId: encoderRequestId(ctx.id, part.index),
        timeoutMs: server.timeouts.encodeMs,
        path: ENCODER_PATH,
      }));
      return;
    } catch (err) {
      // A sibling's failure cancelled this item: not a reason to try another encoder.
      if (group.failure !== undefined || t + 1 >= tries || !isRetryable(err)) throw err;
      run.retrying(t, err);
      await run.pause(server.retry.intervalMs);
    }
  }
}
