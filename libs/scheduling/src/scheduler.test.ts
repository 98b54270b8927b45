import type { Decision, DecisionOrError, SchedulingRequestInput } from '@triad/bus';
import { z } from 'zod';
import { loadSchedulerConfig, type LoadedSchedulerConfig } from './config/load-config';
import { definePlugin, type Scorer } from './framework/plugin';
import { createInTreeRegistry } from './plugins/in-tree';
import { Scheduler } from './scheduler';
import type { EndpointIndex } from './state/endpoint-index';
import { InflightTracker } from './state/inflight-tracker';
import { buildIndex, keyOf, modelServerRecord, schedulingRequest, type EndpointSpec } from './testing';
import { TEST_NOW } from './testing/clock';

/** A scorer returning fixed values by pod name, out-of-range ones included (to test clamping). */
const fixedScorer = definePlugin({
  type: 'fixed',
  kinds: ['scorer'],
  description: 'test: fixed scores by pod',
  params: z.object({ scores: z.record(z.string(), z.number()) }).strict(),
  create: (name, params): Scorer => ({
    name,
    type: 'fixed',
    score: (_ctx, c, out) => {
      for (let i = 0; i < c.size; i++) out[i] = params.scores[c.endpoint(i).record.pod] ?? Number.NaN;
    },
  }),
});

const registry = createInTreeRegistry().register(fixedScorer);

function config(input: unknown): LoadedSchedulerConfig {
  const r = loadSchedulerConfig(input, { registry });
  if (!r.ok) throw new Error(r.reasons.join('\n'));
  return r.loaded;
}

function scheduler(index: EndpointIndex, cfg?: unknown, tracker = new InflightTracker()): Scheduler {
  return new Scheduler({ index, tracker, ...(cfg ? { config: config(cfg) } : {}), instanceId: 'test' });
}

function decide(s: Scheduler, req: Partial<SchedulingRequestInput> = {}): DecisionOrError {
  return s.schedule(schedulingRequest(req), TEST_NOW);
}

function ok(d: DecisionOrError): Decision {
  if (!d.ok) throw new Error(`expected a decision, got ${d.code}: ${d.message}`);
  return d;
}

const podOf = (key: string): string => key.split('.')[2];
const attemptPods = (d: Decision): string[] => d.attempts.map((a) => podOf(a.endpoint.key));
const onlyScorer = (scorers: unknown[], extra: object = {}) => ({ profiles: { default: { filters: [], scorers } }, ...extra });

describe('Scheduler: framework', () => {
  it('ranks by Σ weight × score and returns the topN as ordered attempts', () => {
    const index = buildIndex(['a', 'b', 'c', 'd'].map((pod) => ({ pod })));
    const s = scheduler(index, {
      topN: 3,
      plugins: [
        { type: 'fixed', name: 'x', args: { scores: { a: 10, b: 50, c: 30, d: 40 } } },
        { type: 'fixed', name: 'y', args: { scores: { a: 100, b: 0, c: 40, d: 0 } } },
      ],
      profiles: {
        default: {
          scorers: [
            { plugin: 'x', weight: 2 },
            { plugin: 'y', weight: 0.5 },
          ],
        },
      },
    });
    // finals: a 20+50=70, b 100+0=100, c 60+20=80, d 80+0=80 → b, then c/d tied at 80 (seeded), then a
    const d = ok(decide(s, { explain: true }));
    expect(attemptPods(d)[0]).toBe('b');
    expect(attemptPods(d).slice(1).sort()).toEqual(['c', 'd']);
    const finals = Object.fromEntries((d.explanation?.profiles[0]?.endpoints ?? []).map((e) => [podOf(e.key), e.final]));
    expect(finals).toEqual({ a: 70, b: 100, c: 80, d: 80 });
    expect(d.mode).toBe('aggregated');
    expect(d.decidedBy).toBe('test');
  });

  it('keeps endpoints a scorer does not score (0 from it) and clamps scores into 0..100', () => {
    const index = buildIndex(['a', 'b', 'c', 'd'].map((pod) => ({ pod })));
    const s = scheduler(index, {
      plugins: [{ type: 'fixed', args: { scores: { a: 150, b: -20, c: 60 } } }],
      profiles: { default: { scorers: ['fixed'] } },
    });
    const d = ok(decide(s, { explain: true }));
    expect(d.attempts).toHaveLength(4);
    const scores = Object.fromEntries((d.explanation?.profiles[0]?.endpoints ?? []).map((e) => [podOf(e.key), e.scores['fixed']]));
    expect(scores).toEqual({ a: 100, b: 0, c: 60, d: 0 });
    expect(attemptPods(d).slice(0, 2)).toEqual(['a', 'c']);
  });

  it('still decides when no scorer has an opinion (all finals 0)', () => {
    const index = buildIndex(['a', 'b'].map((pod) => ({ pod })));
    const d = ok(decide(scheduler(index, onlyScorer(['prefix-cache']))));
    expect(attemptPods(d).sort()).toEqual(['a', 'b']);
  });

  it('breaks ties deterministically: same request, same answer; different requests spread', () => {
    const pods = ['a', 'b', 'c', 'd', 'e', 'f'];
    const cfg = onlyScorer(['gpu-usage'], { topN: 6 });
    const forward = scheduler(buildIndex(pods.map((pod) => ({ pod }))), cfg);
    const backward = scheduler(buildIndex([...pods].reverse().map((pod) => ({ pod }))), cfg);
    const d1 = ok(decide(forward, { id: 'same' }));
    expect(ok(decide(forward, { id: 'same' }))).toEqual(d1);
    expect(attemptPods(ok(decide(backward, { id: 'same' })))).toEqual(attemptPods(d1));
    const firsts = new Set(Array.from({ length: 60 }, (_, i) => attemptPods(ok(decide(forward, { id: `r${i}` })))[0]));
    expect(firsts.size).toBe(6);
  });

  it('fails with the name of the filter that emptied the set', () => {
    const index = buildIndex([
      { pod: 'a', kv: 0.97 },
      { pod: 'b', kv: 0.99 },
    ]);
    const d = decide(scheduler(index, { profiles: { default: { filters: ['stale-metrics', 'kv-pressure'], scorers: ['gpu-usage'] } } }));
    expect(d).toMatchObject({ ok: false, code: 'SCHED_FILTERED_OUT' });
    expect(!d.ok && d.message).toContain('filtered out by "kv-pressure"');
  });

  it('records which filter removed each endpoint in the explanation', () => {
    const index = buildIndex([{ pod: 'ok' }, { pod: 'busy', waiting: 50 }, { pod: 'old', scrapedAt: TEST_NOW - 60_000 }]);
    const d = ok(decide(scheduler(index), { explain: true }));
    const byPod = Object.fromEntries((d.explanation?.profiles[0]?.endpoints ?? []).map((e) => [podOf(e.key), e.filteredBy ?? 'kept']));
    expect(byPod).toEqual({ ok: 'kept', busy: 'least-request', old: 'stale-metrics' });
    expect(d.explanation?.profiles[0]?.endpoints[0]?.key).toBe(keyOf('ok'));
  });

  it('honours topN, exclusions and unknown ModelServers', () => {
    const index = buildIndex(['a', 'b', 'c'].map((pod) => ({ pod })));
    expect(ok(decide(scheduler(index, { topN: 2 }))).attempts).toHaveLength(2);
    expect(attemptPods(ok(decide(scheduler(index), { exclude: [keyOf('a'), keyOf('b')] })))).toEqual(['c']);
    expect(decide(scheduler(index), { exclude: ['a', 'b', 'c'].map((p) => keyOf(p)) })).toMatchObject({
      ok: false,
      code: 'SCHED_NO_CANDIDATES',
    });
    expect(decide(scheduler(index), { modelServer: 'nope' })).toMatchObject({ ok: false, code: 'SCHED_UNKNOWN_MODEL_SERVER' });
    expect(decide(scheduler(buildIndex([])))).toMatchObject({ ok: false, code: 'SCHED_NO_CANDIDATES' });
  });

  it('prefers the endpoint that served the same prefix before (post-schedule hook), and forgets removed endpoints', () => {
    const index = buildIndex(['a', 'b', 'c', 'd'].map((pod) => ({ pod })));
    const s = scheduler(index, onlyScorer(['prefix-cache'], { topN: 1 }));
    const hashes = ['h1', 'h2', 'h3'];
    const first = attemptPods(ok(decide(s, { id: 'first', prefixHashes: hashes })))[0];
    for (let i = 0; i < 10; i++) expect(attemptPods(ok(decide(s, { id: `again-${i}`, prefixHashes: hashes })))[0]).toBe(first);
    const record = index.get(keyOf(first))?.record;
    index.applyEndpoint({ op: 'DEL', key: keyOf(first) });
    if (record) index.applyEndpoint({ op: 'PUT', value: record });
    const after = ok(decide(s, { id: 'after', prefixHashes: hashes, explain: true }));
    const scores = (after.explanation?.profiles[0]?.endpoints ?? []).map((e) => e.scores['prefix-cache']);
    expect(scores).toEqual([0, 0, 0, 0]);
  });

  it('uses in-flight counts from dispatch batches (least-request)', () => {
    const index = buildIndex(['a', 'b'].map((pod) => ({ pod })));
    const tracker = new InflightTracker();
    const s = scheduler(index, onlyScorer(['least-request'], { topN: 1 }), tracker);
    tracker.applyBatch({ v: 1, gateway: 'gw', seq: 0, events: [], inflight: { [keyOf('a')]: 3 } }, TEST_NOW);
    // Each decision counts on its endpoint until the gateway's start event: three go to b, which then has a's load.
    for (let i = 0; i < 3; i++) expect(attemptPods(ok(decide(s, { id: `r${i}` })))).toEqual(['b']);
    expect(tracker.snapshot()).toEqual({ [keyOf('a')]: 3, [keyOf('b')]: 3 });
  });

  it('turns a plugin that throws into an INTERNAL error reply', () => {
    const boom = createInTreeRegistry().register(
      definePlugin({
        type: 'boom',
        kinds: ['scorer'],
        description: 'throws',
        params: z.object({}).strict(),
        create: (name): Scorer => ({
          name,
          type: 'boom',
          score: () => {
            throw new Error('kaput');
          },
        }),
      }),
    );
    const r = loadSchedulerConfig(onlyScorer(['boom']), { registry: boom });
    if (!r.ok) throw new Error(r.reasons.join());
    const s = new Scheduler({ index: buildIndex([{ pod: 'a' }]), tracker: new InflightTracker(), config: r.loaded });
    expect(decide(s)).toMatchObject({ ok: false, code: 'INTERNAL', message: expect.stringContaining('kaput') });
  });

  it("hands a learned affinity record to the current config's learners only, also after a config switch", () => {
    const learned: string[] = [];
    const learning = createInTreeRegistry().register(
      definePlugin({
        type: 'learning',
        kinds: ['scorer'],
        description: 'test: records what it learns',
        params: z.object({}).strict(),
        create: (name) => ({
          name,
          type: 'learning',
          score: () => undefined,
          learn: (record: { session?: string }) => learned.push(`${name}:${record.session}`),
        }),
      }),
    );
    const load = (names: string[]): LoadedSchedulerConfig => {
      const r = loadSchedulerConfig(
        { plugins: names.map((name) => ({ type: 'learning', name })), profiles: { default: { filters: [], scorers: names } } },
        { registry: learning },
      );
      if (!r.ok) throw new Error(r.reasons.join());
      return r.loaded;
    };
    const s = new Scheduler({ index: buildIndex([{ pod: 'a' }]), tracker: new InflightTracker(), config: load(['x', 'y']) });
    const record = (session: string) => ({ model: 'm', endpoint: keyOf('a'), role: 'aggregated' as const, prefixHashes: [], session });
    s.learn(record('s1'));
    s.setConfig(load(['z']));
    s.learn(record('s2'));
    expect(learned).toEqual(['x:s1', 'y:s1', 'z:s2']);
  });
});

const pdIndex = (extra: EndpointSpec[] = [], mode: 'pd' | 'epd' = 'pd', prefill = true): EndpointIndex =>
  buildIndex(
    [
      { pod: 'd1', role: 'decode', group: 'g1', kv: 0.5 },
      { pod: 'd2', role: 'decode', group: 'g2', kv: 0.6 },
      { pod: 'd3', role: 'decode', group: 'g3', kv: 0.0 },
      { pod: 'p1a', role: 'prefill', group: 'g1', kv: 0.9 },
      { pod: 'p1b', role: 'prefill', group: 'g1', kv: 0.1 },
      { pod: 'p2', role: 'prefill', group: 'g2', kv: 0.5 },
      ...extra,
    ],
    [modelServerRecord({ mode, prefill })],
  );

describe('Scheduler: stage planning', () => {
  // Stage placement with every stage of the mode (per-request shortcuts are tested in disaggregation.test.ts).
  const everyStage = { localEncode: false, skipPrefill: false, stageFallback: false };
  const gpuOnly = { profiles: { default: { filters: [], scorers: ['gpu-usage'] } }, disaggregation: everyStage };

  const pairs = (d: Decision): string[][] => d.attempts.map((a) => [podOf(a.endpoint.key), podOf(a.prefill?.key ?? '')]);

  it('pd: pairs each decode with a prefill of its own PD group, dropping decodes without one', () => {
    const d = ok(decide(scheduler(pdIndex(), gpuOnly)));
    expect(d.mode).toBe('pd');
    // d3 scores best but g3 has no prefill: skipped. d1 (kv .5) before d2 (kv .6); g1's best prefill is p1b. The
    // remaining pair of g1 (d1 with p1a) comes last.
    expect(pairs(d)).toEqual([
      ['d1', 'p1b'],
      ['d2', 'p2'],
      ['d1', 'p1a'],
    ]);
    expect(d.encoders).toEqual([]);
  });

  it('pd: the alternates move away from the first prefill too (one decode, two prefills)', () => {
    const index = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1' },
        { pod: 'pa', role: 'prefill', group: 'g1', kv: 0.1 },
        { pod: 'pb', role: 'prefill', group: 'g1', kv: 0.2 },
      ],
      [modelServerRecord({ mode: 'pd' })],
    );
    expect(pairs(ok(decide(scheduler(index, gpuOnly))))).toEqual([
      ['d1', 'pa'],
      ['d1', 'pb'],
    ]);
  });

  it('pd: distinct pairs first, then the rest (two decodes and two prefills of one group)', () => {
    const index = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1', kv: 0.1 },
        { pod: 'd2', role: 'decode', group: 'g1', kv: 0.2 },
        { pod: 'pa', role: 'prefill', group: 'g1', kv: 0.1 },
        { pod: 'pb', role: 'prefill', group: 'g1', kv: 0.2 },
      ],
      [modelServerRecord({ mode: 'pd' })],
    );
    expect(pairs(ok(decide(scheduler(index, gpuOnly))))).toEqual([
      ['d1', 'pa'],
      ['d2', 'pb'],
      ['d1', 'pb'],
      ['d2', 'pa'],
    ]);
    expect(pairs(ok(decide(scheduler(index, { ...gpuOnly, topN: 2 }))))).toEqual([
      ['d1', 'pa'],
      ['d2', 'pb'],
    ]);
  });

  it('pd: walks past the topN decodes when the top ones have no prefill', () => {
    const d = ok(decide(scheduler(pdIndex(), { ...gpuOnly, topN: 1 })));
    expect(attemptPods(d)).toEqual(['d1']);
  });

  it('pd: no pair at all is a clear error', () => {
    const index = buildIndex(
      [
        { pod: 'd3', role: 'decode', group: 'g3' },
        { pod: 'p1', role: 'prefill', group: 'g1' },
      ],
      [modelServerRecord({ mode: 'pd' })],
    );
    const d = decide(scheduler(index));
    expect(d).toMatchObject({ ok: false, code: 'SCHED_NO_PREFILL_PAIR' });
    expect(!d.ok && d.message).toContain("no ready prefill endpoint in PD group 'g3'");
  });

  it('pd: explains decode and each prefill group it looked at', () => {
    const d = ok(decide(scheduler(pdIndex(), gpuOnly), { explain: true }));
    expect(d.explanation?.profiles.map((p) => [p.profile, p.group])).toEqual([
      ['decode', undefined],
      ['prefill', 'g1'],
      ['prefill', 'g2'],
    ]);
  });

  const encoders: EndpointSpec[] = [
    { pod: 'e1a', role: 'encode', group: 'g1' },
    { pod: 'e1b', role: 'encode', group: 'g1' },
    { pod: 'e2', role: 'encode', group: 'g2' },
  ];
  const images = (...keys: string[]) => keys.map((key, index) => ({ index, key, modality: 'image' as const }));

  it("epd: one encoder per media item, from the decode pod's group, with alternates", () => {
    const d = ok(decide(scheduler(pdIndex(encoders, 'epd'), gpuOnly), { mediaItems: images('u:a', 'u:b') }));
    expect(d.mode).toBe('epd');
    expect(podOf(d.attempts[0]?.endpoint.key ?? '')).toBe('d1');
    expect(d.encoders.map((e) => e.item)).toEqual([0, 1]);
    for (const e of d.encoders) {
      expect(['e1a', 'e1b']).toContain(podOf(e.endpoint.key));
      expect(e.alternates.map((a) => podOf(a.key))).toEqual(['e1a', 'e1b'].filter((p) => p !== podOf(e.endpoint.key)));
    }
  });

  it('epd: ungrouped encoders serve every group', () => {
    const d = ok(decide(scheduler(pdIndex([{ pod: 'shared', role: 'encode' }], 'epd'), gpuOnly), { mediaItems: images('u:a') }));
    expect(podOf(d.encoders[0]?.endpoint.key ?? '')).toBe('shared');
  });

  it('epd: a text-only request gets no encode stage', () => {
    const d = ok(decide(scheduler(pdIndex(encoders, 'epd'), gpuOnly)));
    expect(d.encoders).toEqual([]);
    expect(d.attempts[0]?.prefill).toBeDefined();
  });

  it('epd: the same image twice goes to the same encoder while load allows', () => {
    const s = scheduler(pdIndex(encoders, 'epd'), gpuOnly);
    const first = ok(decide(s, { id: 'r1', mediaItems: images('u:cat') })).encoders[0];
    const second = ok(decide(s, { id: 'r2', mediaItems: images('u:cat') })).encoders[0];
    expect(second?.endpoint.key).toBe(first?.endpoint.key);
    expect(first?.affinity && second?.affinity).toBe(true);
  });

  it('epd: a hot image spills off its encoder once that encoder carries more than its share', () => {
    const tracker = new InflightTracker();
    const s = scheduler(pdIndex(encoders, 'epd'), gpuOnly, tracker);
    const home = ok(decide(s, { id: 'r1', mediaItems: images('u:hot') })).encoders[0]?.endpoint.key;
    tracker.applyBatch({ v: 1, gateway: 'gw', seq: 0, events: [], inflight: { [home]: 6 } }, TEST_NOW);
    const spilled = ok(decide(s, { id: 'r2', mediaItems: images('u:hot') })).encoders[0];
    expect(spilled?.endpoint.key).not.toBe(home);
    expect(spilled?.affinity).toBe(false);
    expect(spilled?.alternates.map((a) => a.key)).toContain(home);
  });

  it('epd: items of one request spread over the encoders by load', () => {
    const d = ok(
      decide(scheduler(pdIndex(encoders, 'epd'), { ...gpuOnly, plugins: [{ type: 'encoder-affinity', args: { loadFactor: 1 } }] }), {
        mediaItems: images('u:1', 'u:1', 'u:1', 'u:1'),
      }),
    );
    const counts = new Map<string, number>();
    for (const e of d.encoders) counts.set(e.endpoint.key, (counts.get(e.endpoint.key) ?? 0) + 1);
    expect([...counts.values()].sort()).toEqual([2, 2]);
  });

  it('epd: E→PD (no prefill labels) plans encoders and decode only', () => {
    const index = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1' },
        { pod: 'e1', role: 'encode', group: 'g1' },
      ],
      [modelServerRecord({ mode: 'epd', prefill: false })],
    );
    const d = ok(decide(scheduler(index, { disaggregation: everyStage }), { mediaItems: images('u:a') }));
    expect(d.attempts).toEqual([{ endpoint: expect.objectContaining({ pod: 'd1' }) }]);
    expect(podOf(d.encoders[0]?.endpoint.key ?? '')).toBe('e1');
  });

  it("epd: names the DP rank of each attempt's EC consumer, round-robin per consumer, only for DP > 1", () => {
    const control = ['tcp://10.0.0.1:14579', 'tcp://10.0.0.1:14580', 'tcp://10.0.0.1:14581'];
    const index = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1', kv: 0.1, dpSize: 3, ecControlAddresses: control },
        { pod: 'd2', role: 'decode', group: 'g1', kv: 0.2 },
        { pod: 'e1', role: 'encode', group: 'g1' },
      ],
      [modelServerRecord({ mode: 'epd', prefill: false })],
    );
    const s = scheduler(index, gpuOnly);
    const ranks = ['r1', 'r2', 'r3', 'r4'].map((id) =>
      ok(decide(s, { id, mediaItems: images('u:a') })).attempts.map((a) => a.consumerDpRank),
    );
    expect(ranks).toEqual([
      [0, undefined],
      [1, undefined],
      [2, undefined],
      [0, undefined],
    ]);
    const first = ok(decide(s, { id: 'r5' })).attempts[0];
    expect(first?.endpoint).toMatchObject({ dpSize: 3, ecControlAddresses: control });
    expect(first?.consumerDpRank).toBe(1);
  });

  it('epd: in E→P→D the prefill is the consumer whose rank is named', () => {
    const index = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1', dpSize: 4 },
        { pod: 'p1', role: 'prefill', group: 'g1', dpSize: 2 },
        { pod: 'e1', role: 'encode', group: 'g1' },
      ],
      [modelServerRecord({ mode: 'epd' })],
    );
    const s = scheduler(index, gpuOnly);
    expect([0, 1, 2].map(() => ok(decide(s, { mediaItems: images('u:a') })).attempts[0]?.consumerDpRank)).toEqual([0, 1, 0]);
    expect(ok(decide(scheduler(pdIndex(encoders, 'pd'), gpuOnly))).attempts[0]?.consumerDpRank).toBeUndefined();
  });

  it('epd: media without any usable encoder is a clear error', () => {
    const d = decide(scheduler(pdIndex([{ pod: 'e2', role: 'encode', group: 'g2' }], 'epd'), gpuOnly), { mediaItems: images('u:a') });
    expect(d).toMatchObject({ ok: false, code: 'SCHED_NO_ENCODER' });
    expect(!d.ok && d.message).toContain("PD group 'g1'");
  });

  it('SGLang epd: media never plan encoders; the decision is a P/D pair even with no encoder at all', () => {
    const sglang = (extra: EndpointSpec[]) =>
      buildIndex(
        [{ pod: 'd1', role: 'decode', group: 'g1' }, { pod: 'p1', role: 'prefill', group: 'g1' }, ...extra],
        [modelServerRecord({ mode: 'epd', engine: 'SGLang' })],
      );
    for (const index of [sglang([]), sglang([{ pod: 'e1', role: 'encode', group: 'g1' }])]) {
      const d = ok(decide(scheduler(index, gpuOnly), { mediaItems: images('u:a', 'u:b') }));
      expect(d).toMatchObject({ mode: 'epd', encoders: [] });
      expect(pairs(d)).toEqual([['d1', 'p1']]);
    }
  });

  it('pd ignores media items (the engines handle them)', () => {
    expect(ok(decide(scheduler(pdIndex(encoders, 'pd'), gpuOnly), { mediaItems: images('u:a') })).encoders).toEqual([]);
  });

  it('returns SGLang bootstrap ports with the prefill endpoint', () => {
    const index = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1' },
        { pod: 'p1', role: 'prefill', group: 'g1', bootstrapPort: 8998, ip: '10.0.0.7', port: 30000 },
      ],
      [modelServerRecord({ mode: 'pd' })],
    );
    expect(ok(decide(scheduler(index))).attempts[0]?.prefill).toEqual({
      key: keyOf('p1'),
      pod: 'p1',
      ip: '10.0.0.7',
      port: 30000,
      bootstrapPort: 8998,
    });
  });
});
