// What image placement alone can reach with LRU encoder caches: a model with no time, load or queues. Pods hold
// `--cache` images each (least recently used evicted on a miss, as the engines' encoder caches); requests carry 1–2
// images drawn Zipf 1.0 from `--images`, as the benchmarks' image-qa. A router that sees every cache exactly sends
// each request to a pod holding most of its images; rules for ties: `any` (uniform), `rarer` (the holder of the
// image fewer pods hold, as encoder-cache's weighByHolders), `only-copies` (`rarer`, after the pod whose misses
// evict the fewest requests' worth of images no other pod holds). `random` ignores the caches (calibration: the
// simulator's random policy). Prints the encoder hit over the last `--measure` requests per seed.
// Run: npx tsx tools/bench/src/encoder-placement.ts [--pods 8,4] [--cache 64] [--images 200] [--requests 20000]
//        [--measure 4000] [--seeds 1,2,3]
import { Rng, Zipf } from './cluster-sim/rng';
import { markdownTable } from './lib/table';
import { parseToolArgs } from '@triad/testing';

const { values: args } = parseToolArgs({
  options: {
    pods: { type: 'string', default: '8,4' },
    cache: { type: 'string', default: '64' },
    images: { type: 'string', default: '200' },
    requests: { type: 'string', default: '20000' },
    measure: { type: 'string', default: '4000' },
    seeds: { type: 'string', default: '1,2,3' },
  },
});

type Rule = 'random' | 'any' | 'rarer' | 'only-copies';
const RULES: readonly Rule[] = ['random', 'any', 'rarer', 'only-copies'];

/** Encoder hit of the last `measure` of `requests` requests on `pods` LRU caches of `cache` images. */
function placementHit(rule: Rule, pods: number, cache: number, images: number, requests: number, measure: number, seed: number): number {
  const rng = new Rng(seed);
  const zipf = new Zipf(images, 1.0);
  // Map keeps insertion order: the first key is the least recently used.
  const caches = Array.from({ length: pods }, () => new Map<number, true>());
  const seen = new Array<number>(images).fill(0);
  const holders = (image: number) => caches.reduce((n, c) => n + (c.has(image) ? 1 : 0), 0);
  let hits = 0;
  let items = 0;
  for (let t = 0; t < requests; t++) {
    const request = Array.from({ length: rng.int(1, 2) }, () => zipf.sample(rng));
    const distinct = [...new Set(request)];
    const held = (p: number) => distinct.filter((i) => caches[p].has(i)).length;
    let candidates = [...caches.keys()];
    if (rule !== 'random') {
      const most = Math.max(...candidates.map(held));
      candidates = candidates.filter((p) => held(p) === most);
    }
    if (rule === 'only-copies' && candidates.length > 1) {
      // Requests' worth of the images that no other pod holds and this pod's misses would evict.
      const lost = (p: number) => {
        const c = caches[p];
        let evicted = c.size + distinct.filter((i) => !c.has(i)).length - cache;
        let worth = 0;
        for (const k of c.keys()) {
          if (evicted <= 0) break;
          if (distinct.includes(k)) continue;
          evicted--;
          if (holders(k) === 1) worth += seen[k];
        }
        return worth;
      };
      const least = Math.min(...candidates.map(lost));
      candidates = candidates.filter((p) => lost(p) === least);
    }
    if ((rule === 'rarer' || rule === 'only-copies') && candidates.length > 1) {
      const weight = (p: number) => distinct.reduce((w, i) => (caches[p].has(i) ? w + 2 - holders(i) / pods : w), 0);
      const best = Math.max(...candidates.map(weight));
      candidates = candidates.filter((p) => weight(p) === best);
    }
    const c = caches[candidates[rng.int(0, candidates.length - 1)]];
    for (const image of request) {
      if (t >= requests - measure) {
        items++;
        if (c.has(image)) hits++;
      }
      c.delete(image);
      c.set(image, true);
      if (c.size > cache) c.delete(c.keys().next().value as number);
      seen[image]++;
    }
  }
  return hits / items;
}

const seeds = args.seeds.split(',').map(Number);
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const rows = args.pods.split(',').flatMap((pods) =>
  RULES.map((rule) => {
    const hit = seeds.map((s) =>
      placementHit(rule, Number(pods), Number(args.cache), Number(args.images), Number(args.requests), Number(args.measure), s),
    );
    return [pods, rule, pct(hit.reduce((a, b) => a + b, 0) / hit.length), hit.map(pct).join(' / ')];
  }),
);
console.log(
  `# Encoder hit of placement alone (${args.cache}-image LRU caches, ${args.images} images Zipf 1.0, 1–2 per request, ` +
    `last ${args.measure} of ${args.requests} requests, seeds ${seeds.join(', ')})\n`,
);
console.log(markdownTable(['pods', 'rule', 'encoder hit', 'per seed'], rows));
