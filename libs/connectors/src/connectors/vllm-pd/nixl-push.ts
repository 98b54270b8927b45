import type { EngineRequest } from '@triad/request';
import { topLevelValue, type JsonFragments } from '../../json-text';
import { finalLegBody, vllmPrefillBody } from '../../request-bodies';
import type { Attempt, BufferedAnswer, EndpointRef, LegRunner } from '../../types';
import { runConcurrentPd } from './concurrent';
import {
  newKvTransferId,
  nixlPushCoordinatesOf,
  nixlPushDecodeParams,
  nixlPushPrefillParams,
  sameCoordinates,
  type NixlPushCoordinates,
} from './kv-params';
import type { PdInput } from './mooncake';
import { runSequentialPd } from './sequential';

/**
 * The coordinates of each NIXL push prefill (engine id, side-channel host and port, TP and PP size), learnt from its
 * own answers: a push prefill returns them in every answer's `kv_transfer_params` (`transfer_mode: "push"`). Keyed
 * by endpoint and address, so a pod that moved is learnt again; an answer with other coordinates (the engine
 * restarted with a new id) replaces them.
 */
export class PushCoordinates {
  readonly #byPrefill = new Map<string, NixlPushCoordinates>();

  get(prefill: EndpointRef): NixlPushCoordinates | undefined {
    return this.#byPrefill.get(keyOf(prefill));
  }

  /** Takes what a prefill's answer says; true when it changed what was known. */
  learn(prefill: EndpointRef, answer: BufferedAnswer): boolean {
    if (answer.body.length === 0) return false;
    const raw = topLevelValue(answer.body.toString('utf8'), 'kv_transfer_params');
    if (raw === undefined || raw === 'null') return false;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return false;
    }
    const next = nixlPushCoordinatesOf(parsed);
    if (next === undefined) return false;
    const key = keyOf(prefill);
    const known = this.#byPrefill.get(key);
    if (known !== undefined && sameCoordinates(known, next)) return false;
    if (this.#byPrefill.size >= 100_000) this.#byPrefill.clear();
    this.#byPrefill.set(key, next);
    return true;
  }
}

function keyOf(prefill: EndpointRef): string {
  return `${prefill.key} ${prefill.ip}:${prefill.port}`;
}

/**
 * One try with vLLM's NIXL push connector (`NixlPushConnector`): its benefit is that the decode registers its blocks
 * with the prefill while the prefill computes, so both legs go out at once, the decode naming the prefill's
 * coordinates and both the same `transfer_id` (vLLM's push proxy demo). The coordinates come from the prefill's own
 * earlier answers: until one is known, the try is sequential (the push toy proxy's way: the decode gets the
 * prefill's params).
 */
export async function runNixlPush(
  ctx: EngineRequest,
  attempt: Attempt,
  index: number,
  run: LegRunner,
  input: PdInput,
  known: PushCoordinates,
): Promise<void> {
  const prefill = attempt.prefill as EndpointRef;
  const coordinates = known.get(prefill);
  const transferId = newKvTransferId();
  if (coordinates === undefined) {
    const answer = await runSequentialPd(ctx, attempt, index, run, input, nixlPushPrefillParams(transferId));
    if (answer !== undefined) known.learn(prefill, answer);
    return;
  }
  const decodeKvParams = nixlPushDecodeParams(coordinates, ctx.id, transferId);
  // One serialization of the messages for both bodies.
  const fragments: JsonFragments = new Map();
  await runConcurrentPd(ctx, attempt, index, run, {
    prefill,
    prefillBody: vllmPrefillBody(input.body, nixlPushPrefillParams(transferId), fragments),
    decodeBody: finalLegBody(input.body, ctx.proxy.injectUsage, decodeKvParams, undefined, fragments),
    decodeKvParams,
    baseBody: input.body,
    ...(input.consumerRank !== undefined ? { prefillHeaders: { 'X-data-parallel-rank': String(input.consumerRank) } } : {}),
    // Learnt even when the decode fails: a decode that named stale coordinates (a restarted prefill) fails, and
    // the retry should not name them again.
    onPrefillAnswer: (answer) => known.learn(prefill, answer),
  });
}
