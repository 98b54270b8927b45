import { jetstreamManager } from '@nats-io/jetstream';
import { Buckets, EndpointRecordSchema, ModelRouteRecordSchema, ModelServerRecordSchema } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import {
  aggregatedManifests,
  freePort,
  startClusterStack,
  startSteadyLoad,
  waitFor,
  type ClusterStack,
  type NatsClusterNode,
  type SteadyLoad,
} from '@triad/testing';
import { z } from 'zod';

// Issue 22: Triad on a 3-node JetStream cluster (KV buckets with 3 replicas) keeps serving while NATS nodes die.
// Two gateways, two schedulers and two pod-watchers (child processes, each given every seed) run under a steady
// load; one NATS node is killed (SIGKILL) and restarted, then a second one. The documented bound (docs/deployment.md
// §8): no request fails because of it (the bound asserted is 0.5 % of the load, for a request that was mid-way
// through a reconnect), KV state converges on every node, and the rate-limit budget is neither lost nor re-granted.

const MODEL = 'sim-model';
const PODS = 4;
/**
 * 20 input tokens by the gateway's estimate; the limited route allows 100 a month: 5 requests. Budget windows are
 * aligned to the epoch, so a run that straddles a window boundary correctly gets a fresh budget; with an hour unit
 * that happened to about one run in fifty (the minute or so between spending the budget and the last check), which
 * showed up as one request "re-granted" after the node losses. A 30-day window cannot roll within a run.
 */
const TEXT = 'Count these tokens exactly, twenty of them in total.';
const LIMIT = 100;
const body = (model: string) => ({ model, max_tokens: 4, messages: [{ role: 'user', content: TEXT }] });

function manifests(port: number): string {
  const podIps = Array.from({ length: PODS }, (_, i) => `127.0.42.${i + 1}`);
  const limited = { modelName: 'limited', extraSpec: `rateLimit: {inputTokensPerUnit: ${LIMIT}, unit: month}` };
  return aggregatedManifests({ server: 'agg', model: MODEL, port, podIps, routes: [{ modelName: 'chat' }, limited] });
}

async function post(url: string, model: string): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body(model)),
  });
  await res.arrayBuffer();
  return res.status;
}

async function metricSum(stack: ClusterStack, name: string): Promise<number> {
  let sum = 0;
  for (const g of stack.gateways) {
    const text = await (await fetch(`http://127.0.0.1:${g.opsPort}/metrics`)).text();
    for (const line of text.split('\n'))
      if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.split(' ').pop());
  }
  return sum;
}

/** The node leading `stream` right now. */
async function leaderOf(bus: Bus, stream: string): Promise<string | undefined> {
  return (await (await jetstreamManager(bus.nc)).streams.info(stream)).cluster?.leader;
}

/** Every key of the Triad buckets with its value, as one node sees them (a client connected only to it). */
async function kvStateOn(node: NatsClusterNode): Promise<string> {
  const bus = await connectBus({ servers: node.url, name: `check-${node.name}` });
  try {
    const out: string[] = [];
    for (const [bucket, schema] of [
      [Buckets.modelServers, ModelServerRecordSchema],
      [Buckets.modelRoutes, ModelRouteRecordSchema],
      [Buckets.endpoints, EndpointRecordSchema],
    ] as const) {
      const kv = await bus.kv(bucket, schema as z.ZodType);
      for (const key of (await kv.keys()).sort()) {
        const value = (await kv.get(key)) as Record<string, unknown> | undefined;
        // Scrape times move on; what must agree is which objects exist and what they say.
        const { updatedAt: _u, metrics: _m, ...stable } = value ?? {};
        out.push(`${bucket}/${key} ${JSON.stringify(stable)}`);
      }
    }
    return out.join('\n');
  } finally {
    await bus.close();
  }
}

describe('Triad on a 3-node JetStream cluster: NATS nodes killed under steady load', () => {
  let stack: ClusterStack;
  let bus: Bus;
  let load: SteadyLoad | undefined;
  const sims: SimEngineHandle[] = [];

  beforeAll(async () => {
    const port = await freePort();
    for (let i = 0; i < PODS; i++)
      sims.push(await startSimEngine({ engine: 'vllm', role: 'both', host: `127.0.42.${i + 1}`, port, model: MODEL }));
    stack = await startClusterStack({ manifests: manifests(port), gateways: 2, schedulers: 2, podWatchers: 2 });
    bus = await connectBus({ servers: stack.nats.url, name: 'test' });
    for (const g of stack.gateways) {
      await waitFor(async () => (await post(g.url, 'chat').catch(() => 0)) === 200, { what: `${g.name} serving chat`, timeoutMs: 60_000 });
    }
  }, 180_000);
  afterAll(async () => {
    await load?.stop();
    await bus?.close();
    await stack?.close();
    await Promise.all(sims.map((s) => s.close()));
  });

  it('serves through a node loss, its return and a second loss, with KV state and rate-limit budgets consistent', async () => {
    // Spend the limited route's budget first: exactly LIMIT / 20 requests are admitted over both gateways.
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push(await post((stack.gateways[i % 2] as { url: string }).url, 'limited'));
    expect(statuses.filter((s) => s === 200)).toHaveLength(LIMIT / 20);
    expect(statuses.slice(LIMIT / 20)).toEqual([429, 429, 429]);

    load = startSteadyLoad({ targets: stack.gateways.map((g) => g.url), body: body('chat'), concurrency: 4, paceMs: 20 });
    const okInPhase = () => load?.report().phases.at(-1)?.report.ok ?? 0;
    load.phase('steady');
    await waitFor(() => okInPhase() >= 40, { what: 'steady load', timeoutMs: 30_000 });
    const failOpenBefore = await metricSum(stack, 'triad_admission_fail_open_total');
    let limitedAdmitted = 0;
    /** What each limited request got, with the fail-open count after it: says which phase admitted what, if it fails. */
    const limitedLog: string[] = [];
    const limitedDuring = async (): Promise<void> => {
      const status = await post((stack.gateways[0] as { url: string }).url, 'limited');
      if (status === 200) limitedAdmitted++;
      const failedOpen = (await metricSum(stack, 'triad_admission_fail_open_total')) - failOpenBefore;
      limitedLog.push(`${load?.report().phases.at(-1)?.name}: ${status}, fail-open ${failedOpen}`);
    };

    // 1. Kill the node leading the endpoints bucket (and hosting some clients).
    const first = stack.nats.nodes.find((n) => n.name === 'n0') as NatsClusterNode;
    const firstName = await leaderOf(bus, `KV_${Buckets.endpoints}`);
    const victim = stack.nats.nodes.find((n) => n.name === firstName) ?? first;
    await victim.kill();
    load.phase(`${victim.name} killed`);
    await limitedDuring();
    await waitFor(async () => ((await leaderOf(bus, `KV_${Buckets.endpoints}`).catch(() => victim.name)) ?? victim.name) !== victim.name, {
      what: 'a new leader of the endpoints bucket',
      timeoutMs: 30_000,
    });
    await waitFor(() => okInPhase() >= 40, { what: 'load served with a node down', timeoutMs: 30_000 });
    await limitedDuring();

    // 2. Bring it back; it catches up.
    await victim.start();
    await stack.nats.waitForJetStream({ expectPeers: 3 });
    load.phase(`${victim.name} restarted`);
    await waitFor(() => okInPhase() >= 40, { what: 'load served after the restart', timeoutMs: 30_000 });

    // 3. Kill a second node (the one now leading the admission budget), then restart it too.
    const secondName = await leaderOf(bus, `KV_${Buckets.admission}`);
    const second = stack.nats.nodes.find((n) => n.name === secondName && n !== victim) ?? stack.nats.nodes.find((n) => n !== victim);
    if (second === undefined) throw new Error('the cluster has no node besides the one killed first');
    await second.kill();
    load.phase(`${second.name} killed`);
    await limitedDuring();
    await waitFor(() => okInPhase() >= 40, { what: 'load served with the second node down', timeoutMs: 30_000 });
    await limitedDuring();
    await second.start();
    await stack.nats.waitForJetStream({ expectPeers: 3 });
    load.phase(`${second.name} restarted`);
    await waitFor(() => okInPhase() >= 40, { what: 'load served after the second restart', timeoutMs: 30_000 });

    const { total, phases } = await load.stop();
    load = undefined;
    // The documented bound: at most 0.5 % of the requests fail, and none in the steady phases around the losses.
    expect(total.ok).toBeGreaterThan(200);
    expect(total.failed).toBeLessThanOrEqual(Math.floor(total.sent * 0.005));
    for (const p of phases.filter((ph) => ph.name === 'steady' || ph.name.endsWith('restarted')))
      expect(`${p.name}: ${p.report.failed}`).toBe(`${p.name}: 0`);

    // KV state: every node, asked alone, holds the same objects, with every pod there and ready.
    const states = await waitFor(
      async () => {
        const all = await Promise.all(stack.nats.nodes.map(kvStateOn));
        return all.every((s) => s === all[0]) ? all : undefined;
      },
      { what: 'the same KV state on every node', timeoutMs: 30_000 },
    );
    const endpoints = states[0].split('\n').filter((l) => l.startsWith(`${Buckets.endpoints}/`));
    expect(endpoints).toHaveLength(PODS);
    expect(endpoints.every((l) => l.includes('"ready":true'))).toBe(true);

    // The budget bucket settled too: a leader and every replica current. Until then a gateway's budget read may time
    // out and fail open by design, which is not what the check below is about.
    await waitFor(
      async () => {
        const info = await (await jetstreamManager(bus.nc)).streams.info(`KV_${Buckets.admission}`).catch(() => undefined);
        const cluster = info?.cluster;
        return !!cluster?.leader && (cluster.replicas ?? []).length === 2 && (cluster.replicas ?? []).every((r) => r.current && !r.offline);
      },
      { what: 'the admission bucket with a leader and both other replicas current', timeoutMs: 30_000 },
    );
    await waitFor(async () => (await metricSum(stack, 'triad_nats_connected')) === stack.gateways.length, {
      what: 'every gateway connected to NATS again',
      timeoutMs: 30_000,
    });
    // Rate-limit budget: nothing was re-granted across the losses except what fail-open admitted (and counted),
    // and the exhausted budget is still exhausted on the store afterwards.
    const failOpen = (await metricSum(stack, 'triad_admission_fail_open_total')) - failOpenBefore;
    expect(`admitted ${limitedAdmitted}, failed open ${failOpen} (${limitedLog.join('; ')})`).toBe(
      `admitted ${failOpen}, failed open ${failOpen} (${limitedLog.join('; ')})`,
    );
    for (const g of stack.gateways) {
      const status = await post(g.url, 'limited');
      const failedOpen = (await metricSum(stack, 'triad_admission_fail_open_total')) - failOpenBefore - failOpen;
      expect(`${g.name}: ${status}, failed open since ${failedOpen}`).toBe(`${g.name}: 429, failed open since 0`);
    }
  }, 300_000);
});
