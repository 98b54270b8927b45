import { z } from 'zod';
import { definePlugin, type CycleContext, type PickInput, type PickResult, type Picker } from '../../framework/plugin';
import { combine32, hashString32 } from '../../hashing/fast-hash';
import { selectTop } from '../../framework/ranking';
import type { Candidates } from '../../framework/candidates';
import { MaxScorePicker } from '../max-score/max-score';

export const ENCODER_AFFINITY = 'encoder-affinity';

export const EncoderAffinityParamsSchema = z
  .object({
    /**
     * (1+ε) of bounded-load hashing: an encoder takes an item only while its load stays within
     * `ceil(loadFactor · (total load + 1) / encoders)`. 1 means strict balance; larger means stickier caches.
     */
    loadFactor: z.number().min(1).max(10).default(1.25),
  })
  .strict();
export type EncoderAffinityParams = z.infer<typeof EncoderAffinityParamsSchema>;

/**
 * Places a media item on the encoder most likely to have its content cached, without letting a hot item overload
 * one pod: bounded-load rendezvous hashing. Every encoder gets a weight from hash(content key, endpoint key); the
 * item goes to the highest-weight encoder whose load (in-flight from all gateways plus items of this request
 * already placed there) is under the cap, and the rest follow in weight order as alternates. The same content
 * thus lands on the same encoder on every scheduler replica (no shared state needed), a hot key spills to its
 * second encoder (again the same one each time), and adding an encoder moves only ~1/n of the keys.
 * Scores do not reorder the choice; with no item it falls back to max-score.
 */
export class EncoderAffinityPicker implements Picker {
  readonly type = ENCODER_AFFINITY;
  readonly name: string;
  readonly #loadFactor: number;
  readonly #fallback: MaxScorePicker;
  #weights = new Float64Array(64);
  /** The candidates of the pick in progress, for `#heavier`. */
  #candidates: Candidates | undefined;
  /**
   * Whether candidate a's weight ranks before b's (ties by key) in the pick in progress: made once, not per pick
   * (a function made per call is named at run time under esbuild's keepNames, one defineProperty each).
   */
  readonly #heavier = (a: number, b: number): boolean => {
    const w = this.#weights;
    const wa = w[a];
    const wb = w[b];
    if (wa !== wb) return wa > wb;
    const c = this.#candidates as Candidates;
    return c.endpoint(a).key < c.endpoint(b).key;
  };

  constructor(name: string, params: EncoderAffinityParams) {
    this.name = name;
    this.#loadFactor = params.loadFactor;
    this.#fallback = new MaxScorePicker(name);
  }

  pick(ctx: CycleContext, input: PickInput): PickResult {
    const { candidates: c, item, pending } = input;
    const n = c.size;
    if (!item || n === 0) return this.#fallback.pick(ctx, input);
    if (this.#weights.length < n) this.#weights = new Float64Array(Math.max(n, this.#weights.length * 2));
    const w = this.#weights;
    this.#candidates = c;
    const heavier = this.#heavier;
    const keyHash = c.keyHash;
    const inflight = c.inflight();
    const itemHash = hashString32(item.key);
    let total = 1;
    for (let i = 0; i < n; i++) {
      w[i] = combine32(itemHash, keyHash[i]);
      total += loadOf(inflight, pending, i);
    }
    const cap = Math.ceil((this.#loadFactor * total) / n);
    let home = 0;
    let chosen = -1;
    let lightest = 0;
    for (let i = 0; i < n; i++) {
      if (heavier(i, home)) home = i;
      const load = loadOf(inflight, pending, i);
      if (load + 1 <= cap && (chosen < 0 || heavier(i, chosen))) chosen = i;
      if (load < loadOf(inflight, pending, lightest)) lightest = i;
    }
    // The cap always admits the least-loaded encoder; the fallback only guards against rounding surprises.
    if (chosen < 0) chosen = lightest;
    const ranked = selectTop(n, input.count, heavier);
    const order = [chosen, ...ranked.filter((i) => i !== chosen)].slice(0, Math.min(input.count, n));
    return { order, affinity: chosen === home };
  }
}

/** A candidate's load for the bound: its requests in flight and the request's items already placed on it. */
function loadOf(inflight: Float64Array, pending: Int32Array | undefined, i: number): number {
  return inflight[i] + (pending?.[i] ?? 0);
}

export const encoderAffinityPlugin = definePlugin({
  type: ENCODER_AFFINITY,
  kinds: ['picker'],
  description: 'Places each media item on the encoder its content key hashes to, with bounded load (spills when hot).',
  params: EncoderAffinityParamsSchema,
  create: (name, params) => new EncoderAffinityPicker(name, params),
});
