import { REALISTIC_COST } from './cost-model';
import { SimEngine, type Served } from './engine';
import { EventQueue } from './event-queue';
import { makePolicy } from './policy-set';
import { renderPrompt } from './policies';
import { poolLayout, runSimulation } from './simulate';
import { blockKeys, WORKLOADS, WorkloadGenerator, type SimRequest } from './workload';

function engineWithClock(): { engine: SimEngine; run: () => void; at: (t: number, fn: () => void) => void } {
  const events = new EventQueue<() => void>();
  const engine = new SimEngine(0, REALISTIC_COST, (at, fn) => events.push(at, fn));
  return {
    engine,
    run: () => {
      for (let e = events.pop(); e; e = events.pop()) e.item();
    },
    at: (t, fn) => events.push(t, fn),
  };
}

const request = (id: string, arrival: number, segments: SimRequest['segments']): SimRequest => ({
  id,
  arrival,
  segments,
  promptTokens: segments.reduce((a, s) => a + s.tokens, 0),
  outputTokens: 10,
  answer: { id: 9_000_000 + Number(id.slice(1)), tokens: 10 },
  images: segments.flatMap((s) => (s.image === undefined ? [] : [s.image])),
  kind: 'chat',
});

describe('cluster simulation', () => {
  it('shares KV block keys exactly as far as two prompts share their tokens', () => {
    const a = blockKeys(
      [
        { id: 1, tokens: 100 },
        { id: 2, tokens: 40 },
      ],
      16,
    );
    const b = blockKeys(
      [
        { id: 1, tokens: 100 },
        { id: 3, tokens: 40 },
      ],
      16,
    );
    expect(a).toHaveLength(8);
    expect(b.slice(0, 6)).toEqual(a.slice(0, 6));
    expect(b[6]).not.toEqual(a[6]);
  });

  it('serves a repeated prompt from the prefix cache and a repeated image from the encoder cache', () => {
    const { engine, run } = engineWithClock();
    const done: Served[] = [];
    const sys = { id: 1, tokens: 4096, role: 'system' as const };
    engine.submit(
      request('r1', 0, [sys, { id: 2, tokens: 100 }]),
      0,
      () => undefined,
      (s) => done.push(s),
    );
    run();
    engine.submit(
      request('r2', 10_000, [sys, { id: 3, tokens: 100 }]),
      10_000,
      () => undefined,
      (s) => done.push(s),
    );
    engine.submit(
      request('r3', 10_000, [
        { id: 7, tokens: 50 },
        { id: 8, tokens: 576, image: 42 },
      ]),
      10_000,
      () => undefined,
      (s) => done.push(s),
    );
    engine.submit(
      request('r4', 10_000, [
        { id: 9, tokens: 50 },
        { id: 8, tokens: 576, image: 42 },
      ]),
      10_000,
      () => undefined,
      (s) => done.push(s),
    );
    run();
    const [r1, r2, r3, r4] = ['r1', 'r2', 'r3', 'r4'].map((id) => done.find((s) => s.request.id === id)!);
    expect(r1.hitTokens).toBe(0);
    expect(r2.hitTokens).toBe(4096);
    expect(r2.firstTokenAt - 10_000).toBeLessThan(r1.firstTokenAt);
    expect([r3.encoderHits, r4.encoderHits]).toEqual([0, 1]);
  });

  it('queues requests beyond the KV pool until running ones finish', () => {
    const { engine, run } = engineWithClock();
    const done: Served[] = [];
    const big = (id: string) => request(id, 0, [{ id: Number(id.slice(1)) * 10, tokens: 100_000 }]);
    engine.submit(
      big('r1'),
      0,
      () => undefined,
      (s) => done.push(s),
    );
    engine.submit(
      big('r2'),
      0,
      () => undefined,
      (s) => done.push(s),
    );
    expect([engine.running, engine.waiting]).toEqual([1, 1]);
    run();
    expect(done[1].admittedAt).toBeGreaterThanOrEqual(done[0].finishedAt);
  });

  it('renders media markers only where the router mixes media into its hashes', () => {
    const segments = [
      { id: 1, tokens: 4, role: 'user' as const },
      { id: 2, tokens: 576, image: 255 },
    ];
    expect(renderPrompt(segments, true)).toContain('<|media:u:ff|>');
    expect(renderPrompt(segments, false)).not.toContain('media');
  });

  it('repeats a run exactly for a seed, and the same requests reach every policy', () => {
    const opts = { workload: WORKLOADS.chat, capacity: 40, engines: 4, load: 0.8, requests: 200, seed: 7, cost: REALISTIC_COST };
    const a = runSimulation((e) => makePolicy('triad', e), opts);
    expect(runSimulation((e) => makePolicy('triad', e), opts)).toEqual(a);
    const ids = (seed: number) => {
      const g = new WorkloadGenerator(WORKLOADS.mixed, seed);
      return [g.next(0), g.next(1)].map((r) => r.promptTokens);
    };
    expect(ids(3)).toEqual(ids(3));
    const rr = runSimulation((e) => makePolicy('round-robin', e), opts);
    expect(rr.measured).toBe(a.measured);
    expect(rr.imbalance).toBeCloseTo(1, 1);
  });

  it('holds running decodes back while the same engine prefills', () => {
    const { engine, run, at } = engineWithClock();
    const done: Served[] = [];
    const long = { ...request('r1', 0, [{ id: 1, tokens: 100 }]), outputTokens: 50 };
    engine.submit(
      long,
      0,
      () => undefined,
      (s) => done.push(s),
    );
    // A 20,000-token prefill (1 s) arrives while r1 decodes: r1 finishes about that much later.
    at(100, () =>
      engine.submit(
        request('r2', 100, [{ id: 2, tokens: 20_000 }]),
        100,
        () => undefined,
        (s) => done.push(s),
      ),
    );
    run();
    const r1 = done.find((s) => s.request.id === 'r1')!;
    expect(r1.finishedAt - r1.firstTokenAt).toBeGreaterThan(49 * 20 + 900);
  });

  it('splits PD and EPD pools and runs every request through its stages', () => {
    expect(poolLayout('epd', 16)).toEqual({ roles: [...Array(6).fill('prefill'), ...Array(6).fill('decode')], encoders: 4 });
    const base = { engines: 8, load: 0.8, requests: 300, seed: 3, cost: REALISTIC_COST, capacity: 20 };
    const pd = runSimulation((p) => makePolicy('triad-every-stage', p), { ...base, pool: 'pd', workload: WORKLOADS['image-light'] });
    expect(pd.measured).toBe(240);
    expect(pd.skippedPrefill).toBe(0);
    const epd = runSimulation((p) => makePolicy('oracle', p), { ...base, pool: 'epd', workload: WORKLOADS.multimodal });
    expect(epd.measured).toBe(240);
    expect(epd.encoderHit).toBeGreaterThan(0);
  });

  it('per-request disaggregation: Triad prefills short image-light prompts on the decode pods when their stall is not counted', () => {
    const opts = {
      engines: 8,
      load: 0.8,
      requests: 300,
      seed: 3,
      cost: REALISTIC_COST,
      capacity: 20,
      pool: 'pd' as const,
      workload: WORKLOADS['image-light'],
    };
    const eager = runSimulation((p) => makePolicy('triad', p, { disaggregation: { decodeStallWeight: 0 } }), opts);
    expect(eager.skippedPrefill).toBeGreaterThan(0.5);
    expect(eager.measured).toBe(240);
    // By default the decode pods' running requests count against it: busy decode pods keep their prefill legs.
    expect(runSimulation((p) => makePolicy('triad', p), opts).skippedPrefill).toBeLessThan(eager.skippedPrefill);
  });
});
