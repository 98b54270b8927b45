// Admission cost benchmark (issue 8): gateway aggregated throughput (non-stream) with admission off, with an API
// key only, and with an API key plus token rate limits high enough never to refuse (a ModelRoute limit for the
// model and a per-key limit: two scopes, each a shared budget in NATS JetStream KV spent through local leases),
// in the same run. One stack (gateway-stack.ts) per variant runs side by side; the variants are measured in
// turns, in an order that rotates every round, and each row is the median of the rounds (a shared machine is
// noisy). The in-process cost of admission alone is tools/bench/src/admission.ts.
// Run: npx tsx tools/bench/src/admission-gateway.ts [--duration S] [--warmup S] [--rounds N] [--connections 32]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateApiKey, hashApiKey } from '@triad/admission';
import { Buckets, ModelRouteRecordSchema, objectKey } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { waitFor, parseToolArgs } from '@triad/testing';
import { markdownTable } from './lib/table';
import { median, relativeCost as cost } from './lib/stats';
import { runWrk, type WrkResult } from './lib/wrk';
import { startGatewayStack, type GatewayStack } from './gateway-stack';

const BODY = JSON.stringify({
  model: 'agg',
  max_tokens: 16,
  stream: false,
  messages: [{ role: 'user', content: 'Describe the picture in one sentence, please.' }],
});
const NEVER = 1_000_000_000_000; // tokens per minute: never refuses

interface Variant {
  readonly key: string;
  readonly label: string;
  /** Admission config file contents; undefined: admission off. */
  readonly config?: Record<string, unknown>;
  /** Also put a ModelRoute rateLimit on the model. */
  readonly routeLimit: boolean;
}

function cpuSecondsOf(stack: GatewayStack): number {
  return stack.cpuSeconds('gateway');
}

async function chat(stack: GatewayStack, auth: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${stack.gatewayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: auth },
    body: BODY,
  });
  return { status: res.status, body: await res.text() };
}

/**
 * Puts `rateLimit` on the `agg` ModelRoute of a stack, first a 1-token limit until the gateway refuses with
 * GATEWAY_RATE_LIMITED (so the route limit is known to be applied), then the real one until it admits again.
 */
async function putRouteLimit(stack: GatewayStack, auth: string): Promise<void> {
  const bus = await connectBus({ servers: stack.natsUrl, name: 'bench-admission' });
  try {
    const routes = await bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema);
    const put = (inputTokensPerUnit: number, outputTokensPerUnit: number) =>
      routes.put(objectKey('default', 'agg'), {
        schemaVersion: 1,
        namespace: 'default',
        name: 'agg',
        spec: {
          modelName: 'agg',
          rules: [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }],
          rateLimit: { inputTokensPerUnit, outputTokensPerUnit, unit: 'minute' },
        },
      });
    await put(1, 1);
    await waitFor(
      async () => {
        const r = await chat(stack, auth);
        return r.status === 429 && r.body.includes('GATEWAY_RATE_LIMITED');
      },
      { what: 'the route limit applied (a 429)', timeoutMs: 30_000, intervalMs: 100 },
    );
    await put(NEVER, NEVER);
    await waitFor(async () => (await chat(stack, auth)).status === 200, {
      what: 'the high route limit applied',
      timeoutMs: 30_000,
      intervalMs: 100,
    });
  } finally {
    await bus.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseToolArgs({
    options: {
      duration: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '1' },
      rounds: { type: 'string', default: '5' },
      connections: { type: 'string', default: '32' },
    },
  });
  const durationSec = Number(values.duration);
  const warmupSec = Number(values.warmup);
  const rounds = Number(values.rounds);
  const connections = Number(values.connections);

  const key = generateApiKey();
  const auth = `Bearer ${key.key}`;
  // Production scrypt parameters: verification runs once per key, then the outcome is cached.
  const keys = [{ name: 'bench', id: key.id, hash: hashApiKey(key.key), tenant: 'bench' }];
  const variants: Variant[] = [
    { key: 'off', label: 'off', routeLimit: false },
    { key: 'key', label: 'API key', config: { auth: { apiKeys: { keys } } }, routeLimit: false },
    {
      key: 'limit',
      label: 'API key + rate limits (route and key)',
      routeLimit: true,
      config: {
        auth: { apiKeys: { keys } },
        rateLimit: { identities: { 'key:bench': { inputTokensPerUnit: NEVER, outputTokensPerUnit: NEVER, unit: 'minute' } } },
      },
    },
  ];
  const dir = mkdtempSync(join(tmpdir(), 'triad-bench-admission-'));
  const stacks = new Map<string, GatewayStack>();
  try {
    for (const v of variants) {
      let gatewayEnv: Record<string, string> | undefined;
      if (v.config) {
        const file = join(dir, `${v.key}.json`);
        writeFileSync(file, JSON.stringify(v.config));
        gatewayEnv = { TRIAD_ADMISSION_CONFIG: file };
      }
      const stack = await startGatewayStack(gatewayEnv ? { gatewayEnv } : {});
      stacks.set(v.key, stack);
      if (v.config) {
        // Admission is really on: no key is refused.
        const refused = await fetch(`${stack.gatewayUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: BODY,
        });
        if (refused.status !== 401) throw new Error(`${v.label}: a request without a key got ${refused.status}, not 401`);
        await refused.text();
      }
      if (v.routeLimit) await putRouteLimit(stack, auth);
    }

    for (const s of stacks.values())
      await runWrk({
        url: `${s.gatewayUrl}/v1/chat/completions`,
        body: BODY,
        headers: { authorization: auth },
        connections: 32,
        durationSec: warmupSec + 2,
      });
    const samples = new Map<string, { wrk: WrkResult; gatewayUs: number }[]>();
    for (let round = 0; round < rounds; round++) {
      const order = variants.map((_, i) => variants[(i + round) % variants.length]);
      for (const v of order) {
        const stack = stacks.get(v.key) as GatewayStack;
        const before = cpuSecondsOf(stack);
        const wrk = await runWrk({
          url: `${stack.gatewayUrl}/v1/chat/completions`,
          body: BODY,
          headers: { authorization: auth },
          connections,
          durationSec,
          warmupSec,
        });
        const gatewayUs = ((cpuSecondsOf(stack) - before) * 1e6) / (wrk.requests * (1 + warmupSec / durationSec));
        samples.set(v.key, [...(samples.get(v.key) ?? []), { wrk, gatewayUs }]);
        process.stdout.write(
          `round ${round + 1} ${v.label}: ${Math.round(wrk.rps)} req/s, p50 ${wrk.p50ms.toFixed(2)} ms, gateway ` +
            `${Math.round(gatewayUs)} µs/req, non-2xx ${wrk.non2xx}\n`,
        );
      }
    }

    const summary = (k: string) => {
      const s = samples.get(k) as { wrk: WrkResult; gatewayUs: number }[];
      return {
        rps: median(s.map((x) => x.wrk.rps)),
        p50: median(s.map((x) => x.wrk.p50ms)),
        p99: median(s.map((x) => x.wrk.p99ms)),
        g: median(s.map((x) => x.gatewayUs)),
        errors: s.reduce((n, x) => n + x.wrk.errors + x.wrk.non2xx, 0),
      };
    };
    const base = summary('off');
    const rows = variants.map((v) => {
      const r = summary(v.key);
      const vs = v.key === 'off';
      return [
        v.label,
        String(connections),
        r.rps,
        r.p50,
        r.p99,
        Math.round(r.g),
        vs ? '–' : cost(r.rps, base.rps, false),
        vs ? '–' : cost(r.p50, base.p50, true),
        vs ? '–' : cost(r.g, base.g, true),
        String(r.errors),
      ];
    });
    process.stdout.write(
      `\nGateway aggregated (non-stream, 16 tokens); median of ${rounds} interleaved ${durationSec} s runs per ` + `row.\n\n`,
    );
    const header = [
      'admission',
      'conns',
      'req/s',
      'p50 ms',
      'p99 ms',
      'gateway CPU µs/req',
      'throughput cost',
      'p50 cost',
      'gateway CPU cost',
      'errors + non-2xx',
    ];
    process.stdout.write(`${markdownTable(header, rows)}\n`);
  } finally {
    for (const s of stacks.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench admission-gateway: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
