import { Scheduler, InflightTracker } from '@triad/scheduling';
import { buildIndex, schedulingRequest } from '@triad/scheduling/testing';
import { SchedulerMetrics } from '../src/metrics';
import { DecideObserver } from '../src/service/decide-tracing';
import { handleScheduleBatch } from '../src/service/schedule-handler';

describe('DecideObserver', () => {
  it('hands a sink only to the request it was asked to collect, once', () => {
    const observer = new DecideObserver({ pluginTime: () => undefined });
    const a = schedulingRequest({ id: 'a' });
    const b = schedulingRequest({ id: 'b' });
    expect(observer.phasesFor(a)).toBeUndefined();
    observer.collect(a);
    expect(observer.phasesFor(b)).toBeUndefined(); // another request: not collected, and the request is forgotten
    expect(observer.phasesFor(a)).toBeUndefined();
    const phases = observer.collect(a);
    observer.phasesFor(a)?.({
      kind: 'plan',
      profile: 'aggregated',
      plugin: undefined,
      group: undefined,
      item: undefined,
      candidatesIn: 1,
      candidatesOut: 1,
      start: 1,
      end: 2,
      failure: undefined,
    });
    expect(phases).toHaveLength(1);
    expect(observer.phasesFor(a)).toBeUndefined();
  });

  it('with tracing off the handler never asks for phases, and plugin timings still reach the metrics', async () => {
    const metrics = new SchedulerMetrics();
    const observer = new DecideObserver(metrics);
    const collect = jest.spyOn(observer, 'collect');
    const index = buildIndex([{ pod: 'a' }, { pod: 'b' }]);
    const scheduler = new Scheduler({ index, tracker: new InflightTracker(), observer });
    const reply = handleScheduleBatch(
      { v: 1, requests: [{ id: 'r1', namespace: 'default', modelServer: 'ms', model: 'm' }] },
      { scheduler, index, metrics, observer },
    );
    expect('decisions' in reply && reply.decisions[0]?.ok).toBe(true);
    expect(collect).not.toHaveBeenCalled();
    // The plugin counters are filled at scrape time. The first decision is timed, and counts for the sample's 8.
    expect(await metrics.registry.metrics()).toMatch(/triad_scheduler_plugin_calls_total\{plugin="max-score",kind="picker"\} 8\n/);
  });

  it('times one decision in pluginTimingEvery (the first at once), each of its calls and its time counted that many times', async () => {
    const seen: [string, number, number][] = [];
    const observer = new DecideObserver({ pluginTime: (plugin, _kind, ms, calls) => seen.push([plugin, ms, calls]) }, 16, 4);
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map(() => observer.timesPlugins())).toEqual([
      true,
      false,
      false,
      false,
      true,
      false,
      false,
      false,
      true,
    ]);
    observer.pluginTime('least-request', 'scorer', 0.25);
    expect(seen).toEqual([['least-request', 1, 4]]);
    const metrics = new SchedulerMetrics();
    const sampled = new DecideObserver(metrics, 16, 4);
    const index = buildIndex([{ pod: 'a' }, { pod: 'b' }]);
    const scheduler = new Scheduler({ index, tracker: new InflightTracker(), observer: sampled });
    const requests = Array.from({ length: 9 }, (_, i) => ({ id: `r${i}`, namespace: 'default', modelServer: 'ms', model: 'm' }));
    handleScheduleBatch({ v: 1, requests }, { scheduler, index, metrics, observer: sampled });
    // r0, r4 and r8 were timed: 3 picks, 4 each.
    expect(await metrics.registry.metrics()).toMatch(/triad_scheduler_plugin_calls_total\{plugin="max-score",kind="picker"\} 12\n/);
  });

  it('judges one decision in pickQualityEvery (the first at once), and the counters count those', async () => {
    const metrics = new SchedulerMetrics();
    const observer = new DecideObserver(metrics, 4);
    const index = buildIndex([{ pod: 'a' }, { pod: 'b' }]);
    const scheduler = new Scheduler({ index, tracker: new InflightTracker(), observer });
    const requests = Array.from({ length: 9 }, (_, i) => ({ id: `r${i}`, namespace: 'default', modelServer: 'ms', model: 'm' }));
    handleScheduleBatch({ v: 1, requests }, { scheduler, index, metrics, observer });
    // r0, r4 and r8 were judged.
    expect(metrics.picks.view().profiles['aggregated']?.picks).toBe(3);
    const every = new DecideObserver(new SchedulerMetrics(), 1);
    expect([every.judges(), every.judges()]).toEqual([true, true]);
  });
});
