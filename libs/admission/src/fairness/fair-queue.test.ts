import { Registry } from 'prom-client';
import { waitFor } from '@triad/testing';
import { createAdmission, type Admission, type Admitted, type Rejected } from '../admission';
import type { Identity } from '../identity';
import { UsageTracker } from './usage-tracker';
import { answered, answeredOutcome } from '../../test/answered';

const user = (name: string): Identity => ({ kind: 'jwt', id: `jwt:${name}`, user: name, name, labels: {} });

async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get();
  const values = (m?.values ?? []).filter(
    (v) =>
      Object.entries(labels).every(([k, val]) => v.labels[k] === val) && !(v as { metricName?: string }).metricName?.endsWith('_bucket'),
  );
  return values.reduce((s, v) => s + v.value, 0);
}

describe('UsageTracker', () => {
  it("weights tokens with Kthena's formula over a sliding window", () => {
    let t = 1_000_000;
    const tracker = new UsageTracker(60_000, () => t);
    const w = { inputTokenWeight: 1, outputTokenWeight: 2, priorityTokenWeight: 1, priorityRequestNumWeight: 0 };
    tracker.record('m', 'a', 100, 50);
    t += 30_000;
    tracker.record('m', 'a', 10, 0);
    expect(tracker.priority('m', 'a', w)).toBe(100 + 2 * 50 + 10);
    expect(tracker.priority('m', 'a', { ...w, priorityRequestNumWeight: 1000 })).toBe(210 + 2000);
    expect(tracker.priority('other', 'a', w)).toBe(0);
    expect(tracker.priority('m', undefined, w)).toBe(Infinity);
    t += 31_000; // the first record left the window
    expect(tracker.priority('m', 'a', w)).toBe(10);
    t += 60_000;
    tracker.prune();
    expect(tracker.users).toBe(0);
  });
});

describe('fair queueing through the admission facade', () => {
  const admissions: Admission[] = [];
  const make = async (fairness: Record<string, unknown>, registry = new Registry()): Promise<Admission> => {
    const a = await createAdmission({ fairness: { enabled: true, ...fairness } }, { registry });
    admissions.push(a);
    return a;
  };
  afterAll(async () => {
    await Promise.all(admissions.map((a) => a.close()));
  });

  it('lets the lighter user go first and keeps each user FIFO (usage from every mode feeds the tracker)', async () => {
    const admission = await make({ maxConcurrent: 1 });
    const heavy = user('heavy');
    const light = user('light');
    // Earlier traffic: heavy used a lot (e.g. a PD request), light a little.
    for (const [who, out] of [
      [heavy, 5000],
      [light, 10],
    ] as const) {
      const r = (await admission.admit({ identity: who, model: 'm', inputTokens: 10 })) as Admitted;
      r.release({ inputTokens: 10, outputTokens: out });
    }
    const holder = (await admission.admit({ identity: user('other'), model: 'm', inputTokens: 1 })) as Admitted;
    const order: string[] = [];
    const queued = [
      ['heavy-1', heavy],
      ['heavy-2', heavy],
      ['light-1', light],
      ['anonymous-1', { ...light, user: undefined, id: 'anonymous' }],
    ].map(([label, who]) =>
      admission.admit({ identity: who as Identity, model: 'm', inputTokens: 1 }).then((r) => {
        order.push(label as string);
        (r as Admitted).release({ inputTokens: 1, outputTokens: 1 });
      }),
    );
    holder.release({ inputTokens: 1, outputTokens: 1 });
    await Promise.all(queued);
    expect(order).toEqual(['light-1', 'heavy-1', 'heavy-2', 'anonymous-1']);
  });

  it('times out a queued request with a 504 and counts it as cancelled', async () => {
    const registry = new Registry();
    const admission = await make({ maxConcurrent: 1, queueTimeout: '30ms' }, registry);
    const holder = (await admission.admit({ identity: user('a'), model: 'm', inputTokens: 1 })) as Admitted;
    const events: string[] = [];
    const late = (await admission.admit({
      identity: user('b'),
      model: 'm',
      inputTokens: 1,
      span: { addEvent: (n) => events.push(n) },
    })) as Rejected;
    expect(answered(late.rejection)).toMatchObject({
      status: 504,
      code: 'GATEWAY_QUEUE_TIMEOUT',
      body: { error: { type: 'timeout_error', message: "Request processing timed out in queue for model 'm'." } },
    });
    expect(events).toEqual(['triad.admission.queued', 'triad.admission.queue_cancelled', 'triad.admission.rejected']);
    expect(await metricValue(registry, 'kthena_router_fairness_queue_cancelled_total', { model: 'm', user_id: 'b' })).toBe(1);
    expect(await metricValue(registry, 'kthena_router_fairness_queue_size', { model: 'm' })).toBe(0);
    holder.release();
  });

  it('removes a request from the queue when its client goes away', async () => {
    const registry = new Registry();
    const admission = await make({ maxConcurrent: 1 }, registry);
    const holder = (await admission.admit({ identity: user('a'), model: 'm', inputTokens: 1 })) as Admitted;
    const controller = new AbortController();
    const pending = admission.admit({ identity: user('b'), model: 'm', inputTokens: 1, signal: controller.signal });
    await waitFor(async () => (await metricValue(registry, 'kthena_router_fairness_queue_size', { model: 'm', user_id: 'b' })) === 1, {
      what: 'queued',
    });
    controller.abort();
    expect(answeredOutcome(await pending)).toMatchObject({ ok: false, rejection: { status: 499, code: 'GATEWAY_CLIENT_ABORTED' } });
    expect(await metricValue(registry, 'kthena_router_fairness_queue_size', { model: 'm' })).toBe(0);
    holder.release();
    const next = await admission.admit({ identity: user('c'), model: 'm', inputTokens: 1 });
    expect(next.ok).toBe(true);
    expect(await metricValue(registry, 'kthena_router_fairness_queue_inflight', { model: 'm' })).toBe(1);
  });

  it('paces dequeues at maxQps when no concurrency limit is set', async () => {
    const registry = new Registry();
    const admission = await make({ maxQps: 50 }, registry);
    const queuedEvents: string[] = [];
    const span = { addEvent: (name: string) => queuedEvents.push(name) };
    const results = await Promise.all(
      ['a', 'b', 'a', 'c'].map((u) =>
        admission.admit({
          identity: user(u),
          model: 'q',
          inputTokens: 1,
          span,
        }),
      ),
    );
    expect(results.every((r) => r.ok)).toBe(true);
    // The first starts at once; the other three had to wait for their turn.
    expect(queuedEvents.filter((e) => e === 'triad.admission.queued')).toHaveLength(3);
    expect(queuedEvents.filter((e) => e === 'triad.admission.admitted')).toHaveLength(4);
    expect(await metricValue(registry, 'kthena_router_fairness_queue_dequeue_total', { model: 'q' })).toBe(4);
  });
});
