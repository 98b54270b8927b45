import { DispatchBatchSchema, Subjects } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { PrefixCacheScorer, prefixBlockHashes } from '@triad/scheduling';
import { keyOf } from '@triad/scheduling/testing';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startScheduler, type SchedulerService } from '../src/runner';
import { memoryLogger, putEndpoints, putModelServer, req, schedule } from './helpers';

const GROUPS = 8;
const REQUESTS = 48;
const PODS = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];

/** Request i: tenant i % GROUPS's long system prompt, then a question of its own. */
const hashesOf = (i: number): string[] => prefixBlockHashes('m', `${`tenant ${i % GROUPS} system prompt. `.repeat(12)}question ${i}`);

const prefixTable = (s: SchedulerService): PrefixCacheScorer => s.scheduler.config.plugins.get('prefix-cache') as PrefixCacheScorer;

describe('affinity shared across scheduler replicas (triad.v1.affinity)', () => {
  let nats: NatsServerHandle;
  let client: Bus;
  const services: SchedulerService[] = [];
  const logs = memoryLogger();

  beforeAll(async () => {
    nats = await startNatsServer();
    client = await connectBus({ servers: nats.url, name: 'test-client' });
    await putModelServer(client, { name: 'ms' });
    await putEndpoints(
      client,
      PODS.map((pod) => ({ pod })),
    );
  });
  afterAll(async () => {
    for (const s of services) await s.close();
    await client?.close();
    await nats?.close();
  });

  const start = async (instanceId: string): Promise<SchedulerService> => {
    const s = await startScheduler({ natsUrl: nats.url, metricsPort: 0, instanceId, shutdownGraceMs: 1000, logger: logs.logger });
    services.push(s);
    return s;
  };

  let seq = 0;
  /**
   * Sends the workload one request at a time; after each decision, runs it as a gateway would (its leg's start and
   * finish events, which also end the deciding replica's count of it) and waits until every replica knows where its
   * prefix went and that nothing is in flight (a gateway's next request may reach any replica). Returns the prefix hit ratio (the request went to
   * a pod its tenant was sent to before) and which replicas decided.
   */
  const run = async (replicas: SchedulerService[]): Promise<{ hitRatio: number; deciders: Set<string> }> => {
    const seen = new Map<number, Set<string>>();
    const deciders = new Set<string>();
    let hits = 0;
    for (let i = 0; i < REQUESTS; i++) {
      const hashes = hashesOf(i);
      const reply = await schedule(client, [req(`r${i}`, { prefixHashes: hashes })]);
      if (!('decisions' in reply) || !reply.decisions[0]?.ok) throw new Error(JSON.stringify(reply));
      const d = reply.decisions[0];
      deciders.add(d.decidedBy ?? '');
      const pod = d.attempts[0].endpoint.pod;
      const tenant = seen.get(i % GROUPS) ?? new Set<string>();
      if (tenant.has(pod)) hits++;
      tenant.add(pod);
      seen.set(i % GROUPS, tenant);
      const leg = { requestId: `r${i}`, endpoint: keyOf(pod), stage: 'aggregated' as const, at: Date.now() };
      client.publish(Subjects.dispatch, DispatchBatchSchema, {
        v: 1,
        gateway: 'gw-test',
        seq: seq++,
        events: [
          { type: 'start', ...leg },
          { type: 'finish', ...leg, ok: true },
        ],
      });
      const last = hashes.at(-1)!;
      await waitFor(
        () => replicas.every((s) => prefixTable(s).store.owners('m', last)?.has(keyOf(pod)) === true && s.tracker.count(keyOf(pod)) === 0),
        { what: `every replica knows r${i} went to ${pod} and ran` },
      );
    }
    return { hitRatio: hits / REQUESTS, deciders };
  };

  it('gives two replicas the hit ratio of one', async () => {
    const single = await start('solo');
    const one = await run([single]);
    await single.close();
    expect(one.hitRatio).toBeGreaterThan(0.7);

    const a = await start('replica-a');
    const b = await start('replica-b');
    const two = await run([a, b]);
    // The queue group spread the decisions over both replicas, and affinity did not suffer for it.
    expect(two.deciders).toEqual(new Set(['replica-a', 'replica-b']));
    expect(two.hitRatio).toBe(one.hitRatio);
  });
});
