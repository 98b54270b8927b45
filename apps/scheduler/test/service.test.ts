import {
  Buckets,
  DispatchBatchSchema,
  ScrapeFreshnessRecordSchema,
  Subjects,
  endpointKey,
  type Decision,
  type DecisionOrError,
} from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { z } from 'zod';
import { startScheduler, type SchedulerService } from '../src/runner';
import { deleteEndpoint, memoryLogger, podOf, putEndpoints, putModelServer, req, schedule } from './helpers';

const decisions = (reply: Awaited<ReturnType<typeof schedule>>): DecisionOrError[] => {
  if (!('decisions' in reply)) throw new Error(`batch error: ${reply.error.code} ${reply.error.message}`);
  return reply.decisions;
};
const ok = (d: DecisionOrError | undefined): Decision => {
  if (!d?.ok) throw new Error(`expected a decision, got ${JSON.stringify(d)}`);
  return d;
};

describe('scheduler service over a real nats-server, two replicas', () => {
  let nats: NatsServerHandle;
  let client: Bus;
  let a: SchedulerService;
  let b: SchedulerService;
  const logs = memoryLogger();

  beforeAll(async () => {
    nats = await startNatsServer();
    client = await connectBus({ servers: nats.url, name: 'test-gateway' });
    await putModelServer(client, { name: 'ms', mode: 'aggregated' });
    await putModelServer(client, { name: 'vl', mode: 'epd' });
    await putEndpoints(client, [{ pod: 'p0' }, { pod: 'p1' }]);
    await putEndpoints(client, [
      { pod: 'd1', modelServer: 'vl', role: 'decode', group: 'g1' },
      { pod: 'pf1', modelServer: 'vl', role: 'prefill', group: 'g1' },
      { pod: 'e1', modelServer: 'vl', role: 'encode', group: 'g1' },
      { pod: 'e2', modelServer: 'vl', role: 'encode', group: 'g1' },
    ]);
    const base = { natsUrl: nats.url, metricsPort: 0, shutdownGraceMs: 5000, logger: logs.logger };
    [a, b] = await Promise.all([startScheduler({ ...base, instanceId: 'A' }), startScheduler({ ...base, instanceId: 'B' })]);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await client?.close();
    await nats?.close();
  });

  it('reports ready once the index is synced, and serves metrics', async () => {
    const ready = await fetch(`http://127.0.0.1:${a.opsPort}/readyz`);
    expect(ready.status).toBe(200);
    expect(a.index.size).toBe(6);
    expect((await fetch(`http://127.0.0.1:${b.opsPort}/healthz`)).status).toBe(200);
  });

  it('answers a batch in order, with a typed error for the one bad request', async () => {
    const reply = decisions(
      await schedule(client, [req('r1'), { id: 'bad', namespace: 'default' } as never, req('r3', { modelServer: 'nope' })]),
    );
    expect(reply.map((d) => d.id)).toEqual(['r1', 'bad', 'r3']);
    expect(
      ok(reply[0])
        .attempts.map((x) => podOf(x.endpoint.key))
        .sort(),
    ).toEqual(['p0', 'p1']);
    expect(reply[1]).toMatchObject({ ok: false, code: 'SCHED_BAD_REQUEST' });
    expect(reply[2]).toMatchObject({ ok: false, code: 'SCHED_UNKNOWN_MODEL_SERVER' });
  });

  it('answers a malformed batch with a batch error, not a timeout', async () => {
    const raw = await client.request(Subjects.schedule, z.unknown(), { v: 1, requests: [] }, z.unknown(), { timeoutMs: 5000 });
    expect(raw).toMatchObject({ v: 1, error: { code: 'SCHED_BAD_REQUEST' } });
  });

  it('plans epd with one encoder per image and the same encoder for the same image', async () => {
    const image = (key: string, index = 0) => ({ index, key, modality: 'image' as const });
    const [first, second, text] = decisions(
      await schedule(client, [
        req('v1', { modelServer: 'vl', mediaItems: [image('u:cat'), image('u:dog', 1)] }),
        req('v2', { modelServer: 'vl', mediaItems: [image('u:cat')] }),
        req('v3', { modelServer: 'vl' }),
      ]),
    ).map(ok);
    expect(first?.attempts[0]).toMatchObject({ endpoint: { pod: 'd1' }, prefill: { pod: 'pf1' } });
    expect(first?.encoders.map((e) => e.item)).toEqual([0, 1]);
    expect(second?.encoders[0]?.endpoint.key).toBe(first?.encoders[0]?.endpoint.key);
    expect(text?.encoders).toEqual([]);
  });

  it('shares in-flight counts from gateway dispatch batches across both replicas', async () => {
    client.publish(Subjects.dispatch, DispatchBatchSchema, {
      v: 1,
      gateway: 'gw-1',
      seq: 0,
      events: [],
      inflight: { [endpointKey('default', 'ms', 'p0')]: 6 },
      snapshotIntervalMs: 60_000,
    });
    await waitFor(
      () => a.tracker.count(endpointKey('default', 'ms', 'p0')) === 6 && b.tracker.count(endpointKey('default', 'ms', 'p0')) === 6,
      { what: 'both replicas to see the snapshot' },
    );
    const deciders = new Set<string>();
    let n = 0;
    await waitFor(
      async () => {
        const d = ok(decisions(await schedule(client, [req(`load-${n++}`)]))[0]);
        expect(podOf(d.attempts[0]?.endpoint.key ?? '')).toBe('p1');
        deciders.add(d.decidedBy ?? '');
        return deciders.size === 2;
      },
      { what: 'answers from both replicas', timeoutMs: 20_000 },
    );
    expect([...deciders].sort()).toEqual(['A', 'B']);
    // the gateway's requests finish: counts drop on both
    client.publish(Subjects.dispatch, DispatchBatchSchema, {
      v: 1,
      gateway: 'gw-1',
      seq: 1,
      events: [],
      inflight: {},
      snapshotIntervalMs: 60_000,
    });
    await waitFor(
      () => a.tracker.count(endpointKey('default', 'ms', 'p0')) === 0 && b.tracker.count(endpointKey('default', 'ms', 'p0')) === 0,
      { what: 'counts to drop' },
    );
  });

  it('follows endpoint changes in KV incrementally', async () => {
    await putEndpoints(client, [{ pod: 'p2' }]);
    await waitFor(() => a.index.size === 7 && b.index.size === 7, { what: 'p2 to appear' });
    await deleteEndpoint(client, 'p0');
    await deleteEndpoint(client, 'p1');
    await waitFor(() => a.index.size === 5 && b.index.size === 5, { what: 'p0 and p1 to go' });
    const d = ok(decisions(await schedule(client, [req('after-delete')]))[0]);
    expect(d.attempts.map((x) => podOf(x.endpoint.key))).toEqual(['p2']);
  });

  it("ages endpoint metrics by their pod-watcher replica's scrape freshness (stale-metrics keeps a confirmed one)", async () => {
    await putModelServer(client, { name: 'fr', mode: 'aggregated' });
    // Both scraped a minute ago, past the 10 s bound: with neither confirmed, stale-metrics keeps both and the
    // idle one wins on load; once w1 confirms its engines, the busy one is the only current one.
    const minuteAgo = Date.now() - 60_000;
    await putEndpoints(client, [
      { pod: 'busy', modelServer: 'fr', running: 6, scrapedAt: minuteAgo, scrapedBy: 'w1' },
      { pod: 'idle', modelServer: 'fr', running: 0, scrapedAt: minuteAgo, scrapedBy: 'w2' },
    ]);
    // Either replica may answer (queue group): both must hold both endpoints before the first decision.
    await waitFor(
      () => [a, b].every((s) => ['busy', 'idle'].every((pod) => s.index.get(endpointKey('default', 'fr', pod)) !== undefined)),
      { what: 'the endpoints indexed by both replicas' },
    );
    const first = () =>
      schedule(client, [req('f', { modelServer: 'fr' })]).then((r) => podOf(ok(decisions(r)[0]).attempts[0].endpoint.key));
    expect(await first()).toBe('idle');
    const freshness = await client.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema);
    await freshness.put('w1', { schemaVersion: 1, replica: 'w1', confirmedAt: Date.now() + 3_600_000 });
    await waitFor(() => [a, b].every((s) => (s.index.get(endpointKey('default', 'fr', 'busy'))?.scrapedAt ?? 0) > Date.now()), {
      what: 'both replicas aged busy by w1',
    });
    expect(a.index.get(endpointKey('default', 'fr', 'idle'))?.scrapedAt).toBe(minuteAgo);
    expect([await first(), await first()]).toEqual(['busy', 'busy']);
    await Promise.all([deleteEndpoint(client, 'busy', 'fr'), deleteEndpoint(client, 'idle', 'fr'), freshness.delete('w1')]);
    await waitFor(() => [a, b].every((s) => s.index.get(endpointKey('default', 'fr', 'busy')) === undefined && s.index.size === 5), {
      what: 'the endpoints gone again',
    });
  });

  it('hot-reloads config from KV, rejects an invalid one and keeps the running one', async () => {
    const configKv = await client.kv(Buckets.config, z.unknown());
    await putEndpoints(client, [{ pod: 'p3' }, { pod: 'p4' }]);
    await waitFor(() => a.index.size === 7 && b.index.size === 7, { what: 'more endpoints' });
    await configKv.put('scheduler', 'topN: 1\n');
    await waitFor(() => a.activeConfig().origin === 'kv' && b.activeConfig().origin === 'kv', { what: 'KV config applied' });
    expect(ok(decisions(await schedule(client, [req('top1')]))[0]).attempts).toHaveLength(1);

    const applied = a.activeConfig().version;
    await configKv.put('scheduler', { topN: 2, profiles: { default: { scorers: [{ plugin: 'gpu-usage', weight: -1 }] } } });
    const metrics = async () => (await fetch(`http://127.0.0.1:${a.opsPort}/metrics`)).text();
    await waitFor(async () => (await metrics()).includes('triad_scheduler_config_reloads_total{source="kv",result="rejected"} 1'), {
      what: 'rejection counted',
    });
    expect(a.activeConfig().version).toBe(applied);
    expect(ok(decisions(await schedule(client, [req('still-top1')]))[0]).attempts).toHaveLength(1);
    const rejection = logs.lines.find((l) => l['msg'] === 'invalid scheduler config rejected; keeping the running one');
    expect(JSON.stringify(rejection?.['reasons'])).toContain('profiles.default.scorers[0].weight: must be >= 0');

    await configKv.delete('scheduler');
    await waitFor(() => a.activeConfig().origin === 'default' && b.activeConfig().origin === 'default', { what: 'back to defaults' });
    expect(ok(decisions(await schedule(client, [req('defaults-again')]))[0]).attempts).toHaveLength(3);
  });

  it('exports decision, latency and plugin metrics', async () => {
    // The queue group spread the requests over both replicas: look at both.
    const texts = await Promise.all([a, b].map(async (s) => (await fetch(`http://127.0.0.1:${s.opsPort}/metrics`)).text()));
    const text = texts.join('\n');
    expect(text).toMatch(/triad_scheduler_decisions_total\{mode="aggregated",outcome="ok"\} \d+/);
    expect(text).toMatch(/triad_scheduler_decision_duration_seconds_count\{mode="aggregated"\} \d+/);
    expect(text).toMatch(/triad_scheduler_plugin_calls_total\{plugin="least-request",kind="scorer"\} \d+/);
    expect(text).toMatch(/triad_scheduler_endpoints\{role="aggregated"\} 3/);
    expect(text).toContain('triad_scheduler_errors_total{code="SCHED_UNKNOWN_MODEL_SERVER"}');
  });
});
