/**
 * Triad on a 3-node NATS JetStream cluster (KV buckets with 3 replicas) while NATS nodes die: two gateways, two
 * schedulers and two pod-watchers (child processes, each given every seed) under a steady load of small chat
 * requests to four zero-latency vLLM engine-sims. Phases: steady (the baseline of the same run), the node leading
 * the endpoints bucket killed with SIGKILL, restarted, a second node killed, restarted. Per phase: requests,
 * failures, the longest stretch without a successful answer, and JetStream calls retried by the services; at the
 * end whether every node holds the same KV state.
 *
 *   npx tsx tools/bench/src/nats-failover.ts [--phase 8] [--concurrency 4]
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { Buckets, EndpointRecordSchema } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import {
  aggregatedManifests,
  freePort,
  startClusterStack,
  startSteadyLoad,
  waitFor,
  type ClusterStack,
  type NatsClusterNode,
  parseToolArgs,
} from '@triad/testing';
import { markdownTable } from './lib/table';

const { values: args } = parseToolArgs({
  options: { phase: { type: 'string', default: '8' }, concurrency: { type: 'string', default: '4' } },
});
const PHASE_MS = Number(args.phase) * 1000;
const MODEL = 'sim-model';
const PODS = 4;

function manifests(port: number): string {
  const podIps = Array.from({ length: PODS }, (_, i) => `127.0.43.${i + 1}`);
  return aggregatedManifests({ server: 'agg', model: MODEL, port, podIps, routes: [{ modelName: 'chat' }] });
}

async function retries(stack: ClusterStack): Promise<number> {
  let sum = 0;
  for (const s of stack.services) {
    const text = await (await fetch(`http://127.0.0.1:${s.opsPort}/metrics`)).text();
    const m = /^triad_nats_jetstream_retries_total (\S+)$/m.exec(text);
    sum += m ? Number(m[1]) : 0;
  }
  return sum;
}

async function endpointKeysOn(node: NatsClusterNode): Promise<string> {
  const bus = await connectBus({ servers: node.url, name: `check-${node.name}` });
  try {
    const kv = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
    const keys = (await kv.keys()).sort();
    const ready = await Promise.all(keys.map(async (k) => `${k}:${(await kv.get(k))?.ready === true}`));
    return ready.join(',');
  } finally {
    await bus.close();
  }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const port = await freePort();
  const sims: SimEngineHandle[] = [];
  for (let i = 0; i < PODS; i++)
    sims.push(await startSimEngine({ engine: 'vllm', role: 'both', host: `127.0.43.${i + 1}`, port, model: MODEL }));
  const stack = await startClusterStack({ manifests: manifests(port) });
  const bus = await connectBus({ servers: stack.nats.url, name: 'bench' });
  const leader = async (stream: string) => (await (await jetstreamManager(bus.nc)).streams.info(stream)).cluster?.leader;
  const body = { model: 'chat', max_tokens: 4, messages: [{ role: 'user', content: 'hello' }] };
  try {
    for (const g of stack.gateways) {
      await waitFor(
        async () =>
          (
            await fetch(`${g.url}/v1/chat/completions`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(body),
            }).catch(() => undefined)
          )?.status === 200,
        { what: `${g.name} serving`, timeoutMs: 60_000 },
      );
    }
    const load = startSteadyLoad({ targets: stack.gateways.map((g) => g.url), body, concurrency: Number(args.concurrency), paceMs: 20 });
    const retriesAt: number[] = [];
    const phase = async (name: string, action?: () => Promise<void>) => {
      if (action) await action();
      load.phase(name);
      retriesAt.push(await retries(stack));
      await pause(PHASE_MS);
    };
    await phase('steady (baseline)');
    const firstName = await leader(`KV_${Buckets.endpoints}`);
    const first = stack.nats.nodes.find((n) => n.name === firstName) as NatsClusterNode;
    await phase(`${first.name} killed (led the endpoints bucket)`, () => first.kill());
    await phase(`${first.name} restarted`, async () => {
      await first.start();
      await stack.nats.waitForJetStream({ expectPeers: 3 });
    });
    const secondName = (await leader(`KV_${Buckets.admission}`).catch(() => undefined)) ?? (await leader(`KV_${Buckets.modelServers}`));
    const second = stack.nats.nodes.find((n) => n.name === secondName && n !== first) ?? stack.nats.nodes.find((n) => n !== first);
    if (second === undefined) throw new Error('the cluster has no node besides the one killed first');
    await phase(`${second.name} killed`, () => second.kill());
    await phase(`${second.name} restarted`, async () => {
      await second.start();
      await stack.nats.waitForJetStream({ expectPeers: 3 });
    });
    retriesAt.push(await retries(stack));
    const { total, phases } = await load.stop();
    const states = await Promise.all(stack.nats.nodes.map(endpointKeysOn));
    const rows = phases.slice(1).map((p, i) => [
      p.name,
      String(p.report.sent),
      String(p.report.failed),
      Object.entries(p.report.failures)
        .map(([k, v]) => `${k}×${v}`)
        .join(' ') || '–',
      String(p.report.longestGapMs),
      String((retriesAt[i + 1] ?? 0) - (retriesAt[i] ?? 0)),
    ]);
    rows.push([
      '**total**',
      String(total.sent),
      String(total.failed),
      Object.entries(total.failures)
        .map(([k, v]) => `${k}×${v}`)
        .join(' ') || '–',
      String(total.longestGapMs),
      String((retriesAt.at(-1) ?? 0) - (retriesAt[0] ?? 0)),
    ]);
    process.stdout.write(
      `\n### NATS node loss under steady load (3-node JetStream, KV replicas 3; ${PHASE_MS / 1000} s per phase, ` +
        `${args.concurrency} workers, 2 gateways, 2 schedulers, 2 pod-watchers)\n\n`,
    );
    process.stdout.write(
      `${markdownTable(['phase', 'requests', 'failed', 'failures', 'longest gap without a success (ms)', 'JetStream retries'], rows)}\n\n`,
    );
    process.stdout.write(
      `KV endpoints identical on all ${states.length} nodes afterwards: ${states.every((s) => s === states[0]) ? 'yes' : 'NO'} ` +
        `(${(states[0] ?? '').split(',').filter(Boolean).length} endpoints, all ready: ${(states[0] ?? '').split(',').every((s) => s.endsWith(':true'))})\n`,
    );
  } finally {
    await bus.close();
    await stack.close();
    await Promise.all(sims.map((s) => s.close()));
  }
}

void main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
