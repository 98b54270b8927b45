import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { aggregatedManifests, freePort, startClusterStack, waitFor, type ClusterStack, type StackService } from '@triad/testing';

// Issue 30: on the real services (gateway, two scheduler replicas in their queue group, a pod-watcher reading pods
// from a file, NATS), a repeated image must go back to the engine that encoded it — the encoder-cache scorer's
// whole point — unless the load bound overruled the affinity, which the scheduler then counts
// (`triad_scheduler_affinity_overruled_total`). The same for a repeated long prompt prefix (prefix-cache). Engines are
// engine-sims on their own loopback addresses with a small encode/prefill/decode cost, so requests overlap and the
// in-flight counts the load bound reads are real.

const MODEL = 'sim-vl';
const PODS = 6;
const IMAGES = 8;
const ROUNDS = 6;
const CONCURRENCY = 4;

function manifests(port: number): string {
  const podIps = Array.from({ length: PODS }, (_, i) => `127.0.44.${i + 1}`);
  return aggregatedManifests({ server: 'agg', model: MODEL, port, podIps, routes: [{ modelName: 'vl' }] });
}

const imageBody = (image: number) => ({
  model: 'vl',
  max_tokens: 4,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What is in this picture?' },
        { type: 'image_url', image_url: { url: `https://images.example.com/photo-${image}.png` } },
      ],
    },
  ],
});

/** Long shared system prompts (well past the 64-character hash blocks), a short question each time. */
const SYSTEM = Array.from({ length: 4 }, (_, i) => `You are assistant number ${i}. ${'Follow the house rules carefully. '.repeat(20)}`);
const prefixBody = (system: number, turn: number) => ({
  model: 'vl',
  max_tokens: 4,
  messages: [
    { role: 'system', content: SYSTEM[system] },
    { role: 'user', content: `Question ${turn}: what now?` },
  ],
});

async function post(url: string, body: unknown): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

/** Sends `bodies` in order, `CONCURRENCY` at a time; returns the statuses. */
async function sendAll(url: string, bodies: readonly unknown[]): Promise<number[]> {
  const statuses: number[] = new Array<number>(bodies.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < bodies.length) {
      const i = next++;
      statuses[i] = await post(url, bodies[i]);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return statuses;
}

/** Sum of a counter over the scheduler replicas, for the series whose labels include `match`. */
async function schedulerCounter(stack: ClusterStack, name: string, match: Record<string, string>): Promise<number> {
  let sum = 0;
  for (const s of stack.services.filter((x: StackService) => x.kind === 'scheduler')) {
    const text = await (await fetch(`http://127.0.0.1:${s.opsPort}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`)) continue;
      if (Object.entries(match).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.split(' ').pop());
    }
  }
  return sum;
}

async function gatewayCounter(gateway: StackService, name: string, match: Record<string, string>): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${gateway.opsPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) && Object.entries(match).every(([k, v]) => line.includes(`${k}="${v}"`)))
      sum += Number(line.split(' ').pop());
  }
  return sum;
}

/**
 * Which engine received each request, in arrival order, keyed by what `keyOf` reads from the body (the image URL, the
 * system prompt); `undefined` keys are left out.
 */
function placements(
  sims: readonly SimEngineHandle[],
  since: number,
  keyOf: (body: unknown) => string | undefined,
): { key: string; pod: number; at: number }[] {
  const out: { key: string; pod: number; at: number }[] = [];
  sims.forEach((sim, pod) => {
    for (const r of sim.requests()) {
      if (r.method !== 'POST' || r.path !== '/v1/chat/completions' || r.at < since) continue;
      const key = keyOf(r.body);
      if (key !== undefined) out.push({ key, pod, at: r.at });
    }
  });
  return out.sort((a, b) => a.at - b.at);
}

/** Repeats (a key's requests after its first) and how many of them went to an engine that had already had the key. */
function affinityOf(placed: readonly { key: string; pod: number }[]): { repeats: number; hits: number } {
  const holders = new Map<string, Set<number>>();
  let repeats = 0;
  let hits = 0;
  for (const p of placed) {
    const seen = holders.get(p.key);
    if (seen) {
      repeats++;
      if (seen.has(p.pod)) hits++;
      seen.add(p.pod);
    } else {
      holders.set(p.key, new Set([p.pod]));
    }
  }
  return { repeats, hits };
}

const imageOf = (body: unknown): string | undefined => {
  const content = (body as { messages?: { content?: unknown }[] }).messages?.[0]?.content;
  if (!Array.isArray(content)) return undefined;
  const part = content.find((p: { type?: string }) => p.type === 'image_url') as { image_url?: { url?: string } } | undefined;
  return part?.image_url?.url;
};
const systemOf = (body: unknown): string | undefined => {
  const first = (body as { messages?: { role?: string; content?: unknown }[] }).messages?.[0];
  return first?.role === 'system' && typeof first.content === 'string' ? first.content.slice(0, 30) : undefined;
};

describe('affinity on the real services: repeated images and prefixes go back to the engine that has them', () => {
  let stack: ClusterStack;
  const sims: SimEngineHandle[] = [];

  beforeAll(async () => {
    const port = await freePort();
    for (let i = 0; i < PODS; i++) {
      sims.push(
        await startSimEngine({
          engine: 'vllm',
          role: 'both',
          host: `127.0.44.${i + 1}`,
          port,
          model: MODEL,
          latencyProfile: 'realistic',
          latency: { encodeMsPerItem: 20, prefillMsPer1kTokens: 20, decodeMsPerToken: 5 },
        }),
      );
    }
    // The scheduler service decides every request: a budget no loaded test machine overruns, so the gateway never
    // falls back to its local replica (whose decisions these counters would not see).
    stack = await startClusterStack({
      manifests: manifests(port),
      gateways: 1,
      schedulers: 2,
      podWatchers: 1,
      args: { gateway: ['--schedule-budget-ms', '10000'] },
      // Every decision judged: the test matches each repeat that missed its engine with an overruled count.
      env: { TRIAD_PICK_QUALITY_EVERY: '1' },
    });
    const gateway = stack.gateways[0];
    await waitFor(async () => (await post(gateway.url, prefixBody(0, 0)).catch(() => 0)) === 200, {
      what: 'gateway serving',
      timeoutMs: 60_000,
    });
  }, 180_000);
  afterAll(async () => {
    await stack?.close();
    await Promise.all(sims.map((s) => s.close()));
  });

  it('sends a repeated image to an engine that already encoded it, or counts the load bound that overruled it', async () => {
    const gateway = stack.gateways[0];
    const since = Date.now();
    const overruledBefore = await schedulerCounter(stack, 'triad_scheduler_affinity_overruled_total', { scorer: 'encoder-cache' });
    // Every image once per round, rounds in sequence: each image's later requests are repeats.
    const bodies = Array.from({ length: ROUNDS * IMAGES }, (_, i) => imageBody(i % IMAGES));
    const statuses = await sendAll(gateway.url, bodies);
    expect(statuses.every((s) => s === 200)).toBe(true);

    const placed = placements(sims, since, imageOf);
    expect(placed).toHaveLength(ROUNDS * IMAGES);
    const { repeats, hits } = affinityOf(placed);
    const overruled =
      (await schedulerCounter(stack, 'triad_scheduler_affinity_overruled_total', { scorer: 'encoder-cache' })) - overruledBefore;
    // Provisional figure for docs/routing-benchmark.md (issue 30): the repeats' hit ratio on this stack.
    const engines = new Set(placed.map((p) => p.pod)).size;
    const busiest = Math.max(...sims.map((_, pod) => placed.filter((p) => p.pod === pod).length));
    process.stdout.write(
      `image repeats ${repeats}, on an engine holding the image ${hits}, overruled by load ${overruled}; ` +
        `engines used ${engines}, busiest took ${busiest} of ${placed.length}\n`,
    );
    expect(repeats).toBe((ROUNDS - 1) * IMAGES);
    // Each repeat that went elsewhere was a decision the load bound overruled, and the scheduler counted it.
    expect(repeats - hits).toBeLessThanOrEqual(overruled);
    // Affinity decided most of them: random placement over six engines would hit about a third of the repeats.
    expect(hits).toBeGreaterThan(repeats / 2);
    // And by image, not by piling every image onto one engine (which the shared text prefix alone would do): the
    // eight images have their own engines (rendezvous homes of their content keys).
    expect(engines).toBeGreaterThanOrEqual(3);
    expect(
      await schedulerCounter(stack, 'triad_scheduler_pick_decider_total', { profile: 'aggregated', scorer: 'encoder-cache' }),
    ).toBeGreaterThan(0);
    // And the gateway decided nothing itself: this is the service path.
    expect(await gatewayCounter(gateway, 'triad_gateway_schedule_duration_seconds_count', { source: 'local' })).toBe(0);
  });

  it('sends a repeated long prefix to an engine that already has it, or counts the load bound that overruled it', async () => {
    const gateway = stack.gateways[0];
    const since = Date.now();
    const bodies = Array.from({ length: ROUNDS * SYSTEM.length }, (_, i) => prefixBody(i % SYSTEM.length, i));
    const statuses = await sendAll(gateway.url, bodies);
    expect(statuses.every((s) => s === 200)).toBe(true);

    const placed = placements(sims, since, systemOf);
    const { repeats, hits } = affinityOf(placed);
    process.stdout.write(`prefix repeats ${repeats}, on an engine holding the prefix ${hits}\n`);
    expect(repeats).toBe((ROUNDS - 1) * SYSTEM.length);
    expect(hits).toBeGreaterThan(repeats / 2);
    expect(
      await schedulerCounter(stack, 'triad_scheduler_pick_decider_total', { profile: 'aggregated', scorer: 'prefix-cache' }),
    ).toBeGreaterThan(0);
  });
});
