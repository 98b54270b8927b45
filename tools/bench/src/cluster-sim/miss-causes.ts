import type { PolicyFactory, SimPool } from './simulate';
import type { SimRequest } from './workload';

/**
 * Why an image item was or was not in the encoder cache of the pod chosen to encode it, judged when the request was
 * routed (the simulator sees every engine's and encoder's cache, which a router does not):
 * - `held`: the chosen pod holds it (a hit, unless evicted before the request runs);
 * - `first-send`: no earlier request had it (a miss wherever it goes);
 * - `split`: another pod holds it, and the chosen pod holds another of the request's images (no pod held all; not
 *   for encoders, which are chosen per item);
 * - `passed-over`: another pod holds it, and the chosen pod none of the request's images (load won);
 * - `evicted`: sent before, but no pod holds it any more.
 */
export type MissCause = 'held' | 'first-send' | 'split' | 'passed-over' | 'evicted';
export const MISS_CAUSES: readonly MissCause[] = ['held', 'first-send', 'split', 'passed-over', 'evicted'];

export class MissCauses {
  readonly counts: Record<MissCause, number> = { held: 0, 'first-send': 0, split: 0, 'passed-over': 0, evicted: 0 };
  readonly #sent = new Set<number>();
  #routed = 0;

  /** `measureFrom`: requests routed before this many are not counted (the warm-up), but their images are sent. */
  constructor(readonly measureFrom: number) {}

  /** Wraps a policy factory so every route it takes is judged. */
  wrap(factory: PolicyFactory): PolicyFactory {
    return (pool) => {
      const policy = factory(pool);
      const route = policy.route.bind(policy);
      policy.route = (request, now, keys) => {
        const r = route(request, now, keys);
        if (r !== null) {
          const encoding = request.images.map((_, k) =>
            r.encoders?.[k] !== undefined ? { encoder: r.encoders[k] } : { engine: r.prefill ?? r.engine },
          );
          this.#judge(pool, request, encoding);
        }
        return r;
      };
      return policy;
    };
  }

  /** Shares of the counted items per cause. */
  shares(): Record<MissCause, number> {
    const total = MISS_CAUSES.reduce((n, c) => n + this.counts[c], 0);
    return Object.fromEntries(MISS_CAUSES.map((c) => [c, total === 0 ? NaN : this.counts[c] / total])) as Record<MissCause, number>;
  }

  #judge(pool: SimPool, request: SimRequest, encoding: readonly ({ encoder: number } | { engine: number })[]): void {
    const counted = this.#routed++ >= this.measureFrom;
    const pods = pool.encoders.length > 0 && encoding.some((e) => 'encoder' in e) ? 'encoders' : 'engines';
    const holds = (pod: number, image: number): boolean =>
      pods === 'encoders' ? (pool.encoders[pod]?.holds(image) ?? false) : (pool.engines[pod]?.hasEncoded(image) ?? false);
    const candidates = (pods === 'encoders' ? pool.encoders : pool.engines).map((p) => p.index);
    request.images.forEach((image, k) => {
      const target = encoding[k];
      const pod = 'encoder' in target ? target.encoder : target.engine;
      if (counted) {
        let cause: MissCause;
        if (!this.#sent.has(image)) cause = 'first-send';
        else if (holds(pod, image)) cause = 'held';
        else if (!candidates.some((p) => holds(p, image))) cause = 'evicted';
        // Encoders are chosen per item: another item on the same encoder is no reason.
        else if (pods === 'engines' && request.images.some((other) => other !== image && holds(pod, other))) cause = 'split';
        else cause = 'passed-over';
        this.counts[cause]++;
      }
    });
    for (const image of request.images) this.#sent.add(image);
  }
}
