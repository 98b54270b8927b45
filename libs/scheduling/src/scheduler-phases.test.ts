import type { SchedulingRequest, SchedulingRequestInput } from '@triad/bus';
import { loadSchedulerConfig } from './config/load-config';
import { createInTreeRegistry } from './plugins/in-tree';
import type { SchedulingObserver, SchedulingPhase } from './planning/profile-run';
import { Scheduler } from './scheduler';
import type { EndpointIndex } from './state/endpoint-index';
import { InflightTracker } from './state/inflight-tracker';
import { buildIndex, keyOf, modelServerRecord, schedulingRequest } from './testing';
import { TEST_NOW } from './testing/clock';

/** A clock that advances by one per reading, so every reading is distinct and the count of readings is known. */
function tickingClock(): { clock: () => number; readings: () => number } {
  let t = 1000;
  return { clock: () => ++t, readings: () => t - 1000 };
}

/** An observer that keeps plugin timings, and the phases of the requests whose id starts with `traced`. */
function recordingObserver(): SchedulingObserver & { timings: string[]; phases: Map<string, SchedulingPhase[]>; asked: string[] } {
  const timings: string[] = [];
  const phases = new Map<string, SchedulingPhase[]>();
  const asked: string[] = [];
  return {
    timings,
    phases,
    asked,
    pluginTime: (plugin, kind) => timings.push(`${kind}:${plugin}`),
    phasesFor: (request: SchedulingRequest) => {
      asked.push(request.id);
      if (!request.id.startsWith('traced')) return undefined;
      const list: SchedulingPhase[] = [];
      phases.set(request.id, list);
      return (p) => list.push(p);
    },
  };
}

function scheduler(index: EndpointIndex, observer: SchedulingObserver | undefined, clock: () => number, cfg?: unknown): Scheduler {
  const loaded = cfg === undefined ? undefined : loadSchedulerConfig(cfg, { registry: createInTreeRegistry() });
  if (loaded && !loaded.ok) throw new Error(loaded.reasons.join('\n'));
  return new Scheduler({
    index,
    tracker: new InflightTracker(),
    ...(loaded ? { config: loaded.loaded } : {}),
    ...(observer ? { observer } : {}),
    clock,
  });
}

const decide = (s: Scheduler, req: Partial<SchedulingRequestInput>) => s.schedule(schedulingRequest(req), TEST_NOW);
/** `kind profile[/group][#item] plugin in→out` per phase: the order and the counts in one readable line each. */
const line = (p: SchedulingPhase): string =>
  `${p.kind} ${p.profile}${p.group ? `/${p.group}` : ''}${p.item !== undefined ? `#${p.item}` : ''}${p.plugin ? ` ${p.plugin}` : ''}` +
  `${p.candidatesIn !== undefined ? ` ${p.candidatesIn}→${p.candidatesOut}` : ''}${p.failure ? ` ${p.failure.code}` : ''}`;

const epdIndex = () =>
  buildIndex(
    [
      { pod: 'd1', role: 'decode', group: 'g1' },
      { pod: 'd2', role: 'decode', group: 'g1', waiting: 50 },
      { pod: 'p1', role: 'prefill', group: 'g1' },
      { pod: 'e1', role: 'encode', group: 'g1' },
      { pod: 'e2', role: 'encode', group: 'g1' },
    ],
    [modelServerRecord({ mode: 'epd' })],
  );
const images = (...keys: string[]) => keys.map((key, index) => ({ index, key, modality: 'image' as const }));
const LANGUAGE_SCORERS = [
  'least-request',
  'gpu-usage',
  'least-latency',
  'prefix-cache',
  'session-affinity',
  'encoder-cache',
  'prefill-backlog',
];

describe('Scheduler: phase records for an observer that asks for them', () => {
  it('reports every filter, scorer, pick and hook of an epd decision, each profile run closed by its plan', () => {
    const observer = recordingObserver();
    const s = scheduler(epdIndex(), observer, tickingClock().clock);
    const d = decide(s, { id: 'traced-1', mediaItems: images('u:a', 'u:b') });
    expect(d.ok).toBe(true);
    const run = (profile: string, n: number, out: number, scorers: string[]) => [
      `filter ${profile} stale-metrics ${n}→${n}`,
      `filter ${profile} least-request ${n}→${out}`,
      ...scorers.map((sc) => `scorer ${profile} ${sc} ${out}→${out}`),
      `plan ${profile} ${n}→${out}`,
    ];
    expect(observer.phases.get('traced-1')!.map(line)).toEqual([
      // d2 has 50 waiting requests: least-request filters it out.
      ...run('decode', 2, 1, LANGUAGE_SCORERS),
      'picker decode max-score 1→1',
      ...run('prefill/g1', 1, 1, LANGUAGE_SCORERS),
      'picker prefill/g1 max-score 1→1',
      ...run('encode/g1', 2, 2, ['least-request']),
      'picker encode/g1#0 encoder-affinity 2→2',
      'picker encode/g1#1 encoder-affinity 2→2',
      ...['decode/g1', 'prefill/g1'].flatMap((p) =>
        ['prefix-cache', 'session-affinity', 'encoder-cache'].map((h) => `post-schedule ${p} ${h}`),
      ),
    ]);
  });

  it('times each phase with the given clock; a plan spans its plugins; plugin timings are the same readings', () => {
    const observer = recordingObserver();
    const durations: number[] = [];
    observer.pluginTime = (_plugin, _kind, ms) => durations.push(ms);
    decide(scheduler(epdIndex(), observer, tickingClock().clock), { id: 'traced-2' });
    const phases = observer.phases.get('traced-2')!;
    let last = 0;
    for (const p of phases) {
      expect(p.end).toBeGreaterThan(p.start);
      if (p.kind !== 'plan') {
        expect(p.start).toBeGreaterThan(last); // plugin phases follow one another
        last = p.end;
      }
    }
    const plan = phases.find((p) => p.kind === 'plan' && p.profile === 'decode')!;
    for (const p of phases.filter((x) => x.profile === 'decode' && (x.kind === 'filter' || x.kind === 'scorer'))) {
      expect(p.start).toBeGreaterThan(plan.start);
      expect(p.end).toBeLessThan(plan.end);
    }
    expect(durations).toEqual(phases.filter((p) => p.kind !== 'plan').map((p) => p.end - p.start));
  });

  it('asks once per request; a declined request builds no records and reads the clock only for plugin timings', () => {
    const observer = recordingObserver();
    const clock = tickingClock();
    const s = scheduler(epdIndex(), observer, clock.clock);
    decide(s, { id: 'plain-1', mediaItems: images('u:a') });
    expect(observer.asked).toEqual(['plain-1']);
    expect(observer.phases.size).toBe(0);
    expect(clock.readings()).toBe(2 * observer.timings.length);
    decide(s, { id: 'traced-3', mediaItems: images('u:a') });
    expect(observer.asked).toEqual(['plain-1', 'traced-3']);
    // The traced request adds two readings per plan (three profile runs).
    expect(clock.readings()).toBe(2 * observer.timings.length + 2 * 3);
  });

  it('a plan that ends without candidates carries the failure; the filter that emptied it shows n→0', () => {
    const observer = recordingObserver();
    const index = buildIndex([
      { pod: 'a', kv: 0.97 },
      { pod: 'b', kv: 0.99 },
    ]);
    const d = decide(
      scheduler(index, observer, tickingClock().clock, { profiles: { default: { filters: ['kv-pressure'], scorers: ['gpu-usage'] } } }),
      { id: 'traced-4' },
    );
    expect(d).toMatchObject({ ok: false, code: 'SCHED_FILTERED_OUT' });
    const phases = observer.phases.get('traced-4')!;
    expect(phases.map(line)).toEqual(['filter aggregated kv-pressure 2→0', 'plan aggregated 2→0 SCHED_FILTERED_OUT']);
    expect(phases[1].failure!.message).toContain('filtered out by "kv-pressure"');
  });

  it("reports the request's exclusion list as the first filter", () => {
    const observer = recordingObserver();
    const index = buildIndex(['a', 'b', 'c'].map((pod) => ({ pod })));
    decide(scheduler(index, observer, tickingClock().clock, { profiles: { default: { filters: [], scorers: ['gpu-usage'] } } }), {
      id: 'traced-5',
      exclude: [keyOf('a')],
    });
    expect(observer.phases.get('traced-5')!.map(line)).toEqual([
      'filter aggregated exclude 3→2',
      'scorer aggregated gpu-usage 2→2',
      'plan aggregated 3→2',
      'picker aggregated max-score 2→2',
    ]);
  });

  it('an observer without phasesFor gets plugin timings only; no observer reads no clock', () => {
    const timings: string[] = [];
    const clock = tickingClock();
    decide(scheduler(epdIndex(), { pluginTime: (plugin, kind) => timings.push(`${kind}:${plugin}`) }, clock.clock), { id: 'traced-6' });
    expect(timings).toContain('picker:max-score');
    expect(clock.readings()).toBe(2 * timings.length);
    const silent = tickingClock();
    expect(decide(scheduler(epdIndex(), undefined, silent.clock), { id: 'traced-7' }).ok).toBe(true);
    expect(silent.readings()).toBe(0);
  });
  it('a decision the observer does not time (timesPlugins) reads no clock and reports no timing, unless its phases are collected', () => {
    const observer = recordingObserver();
    const timed: string[] = [];
    // Times the requests whose id ends in -timed.
    observer.timesPlugins = (request) => {
      timed.push(request.id);
      return request.id.endsWith('-timed');
    };
    const clock = tickingClock();
    const s = scheduler(epdIndex(), observer, clock.clock);
    const untimed = decide(s, { id: 'plain-8', mediaItems: images('u:a') });
    expect(clock.readings()).toBe(0);
    expect(observer.timings).toEqual([]);
    decide(s, { id: 'plain-9-timed', mediaItems: images('u:a') });
    const perDecision = observer.timings.length;
    expect(perDecision).toBeGreaterThan(0);
    expect(clock.readings()).toBe(2 * perDecision);
    // A traced request that is not timed still gets its phases, clocked, and reports no plugin timing.
    decide(s, { id: 'traced-8', mediaItems: images('u:a') });
    expect(observer.timings).toHaveLength(perDecision);
    expect(observer.phases.get('traced-8')!.filter((p) => p.kind === 'scorer')).toHaveLength(2 * LANGUAGE_SCORERS.length + 1);
    expect(timed).toEqual(['plain-8', 'plain-9-timed', 'traced-8']);
    // Timing does not change the decision: a scheduler that times everything decides the same.
    const always = scheduler(epdIndex(), recordingObserver(), tickingClock().clock);
    expect(decide(always, { id: 'plain-8', mediaItems: images('u:a') })).toEqual(untimed);
  });
});
