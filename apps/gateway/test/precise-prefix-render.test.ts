import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SimEngineHandle } from '@triad/engine-sim';
import { EventStream, KvIndexer, VllmBlockHasher, decodeKvEventBatch } from '@triad/kv-events';
import { pngDataUrl, waitFor, writeVlTokenizer } from '@triad/testing';
import { accessLines, startHarness, type Harness } from './support/harness';
import { writePreciseOnlyConfig } from './support/precise-config';

/**
 * Precise prefix routing for images as clients send them (inline, no `uuid`): only the engine can name such an
 * image (vLLM hashes its pixels), so the gateway tokenizes with the engines' render endpoint
 * (`source: engine, vllmEndpoint: render`), which answers the processed token ids with each image's hash and
 * placement. Simulated vLLM engines with the engine-core model (Qwen2-VL image processor over the shipped
 * tokenizer) publish their block pools' KV events over ZMQ; a kv-indexer carries them over NATS to an in-process
 * gateway. The keys the gateway computes from the render answer must be the block hashes the engine published for
 * that request (images as extra keys), every one of them (the key-agreement counter), and the next request with
 * the same images goes to the engine holding them.
 */
const MODEL = 'vl-model';
const SERVER = 'vl';
/** One-token words for the shipped tokenizer, four characters each for the simulator: both count the same tokens. */
const WORDS = ['cat', 'dog', 'sun', 'sea', 'red', 'box', 'car', 'hat', 'pen', 'tea', 'war', 'web'];
const words = (n: number, seed: number): string =>
  Array.from({ length: n }, (_, i) => `${WORDS[(seed * 7 + i * (seed + 3)) % WORDS.length]} `).join('');

/** A system prompt of 40 words, two inline 448×448 PNGs (256 placeholder tokens each), a question of 20 words. */
const imageChat = (seed: number) => ({
  model: SERVER,
  max_tokens: 1,
  messages: [
    { role: 'system', content: [{ type: 'text', text: words(40, seed) }] },
    {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: pngDataUrl(448, 448, 0x102030 + seed) } },
        { type: 'image_url', image_url: { url: pngDataUrl(448, 448, 0x405060 + seed) } },
        { type: 'text', text: words(20, seed + 1) },
      ],
    },
  ],
});

describe('precise-prefix-cache keys for images without a uuid, from the engines’ render endpoint', () => {
  let h: Harness;
  let indexer: KvIndexer;
  let dir: string;
  const pods = new Map<string, SimEngineHandle>();
  const stored = new Map<string, string[]>();
  const streams: EventStream[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'triad-precise-render-'));
    const tokenizer = writeVlTokenizer(join(dir, 'tokenizer'));
    const configFile = writePreciseOnlyConfig(dir, [
      { modelServer: `default/${SERVER}`, source: 'engine', vllmEndpoint: 'render', path: tokenizer },
    ]);
    h = await startHarness({ config: { scheduling: 'in-process', schedulerConfig: configFile } });
    await h.putServer(SERVER, {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: SERVER } },
      workloadPort: { port: 8000, protocol: 'http' },
    });
    await h.putRoute(SERVER, { modelName: SERVER, rules: [{ targetModels: [{ modelServerName: SERVER, weight: 100 }] }] });
    for (const i of [0, 1]) {
      const pod = `${SERVER}-${i}`;
      const sim = await h.startSim({
        engine: 'vllm',
        role: 'both',
        host: `127.0.33.${i + 1}`,
        model: MODEL,
        latencyProfile: 'realistic',
        latency: { decodeMsPerToken: 1, prefillMsPer1kTokens: 5 },
        engineCore: { maxNumSeqs: 4 },
        kvEvents: { endpoint: 'tcp://*:*', tokenizer, blockSize: 16, hashAlgo: 'sha256', hashSeed: '0' },
      });
      pods.set(pod, sim);
      const endpoint = sim.kvEventEndpoints?.[0]?.endpoint as string;
      // The test's own subscriber: what the engine published, to compare with the gateway's keys.
      let connected = false;
      stored.set(pod, []);
      streams.push(
        new EventStream(
          { endpoint, replayEndpoint: undefined },
          {
            onMessage: (m) => {
              for (const e of decodeKvEventBatch(m.payload).events) if (e.type === 'stored') stored.get(pod)?.push(...e.hashes);
            },
            onMalformed: (why) => {
              throw new Error(why);
            },
            onConnection: (up) => (connected = up),
          },
        ),
      );
      await waitFor(() => connected, { what: `the subscriber to ${pod}` });
      await h.putEndpoint(SERVER, pod, 'aggregated', sim, { kvEvents: { endpoint } });
    }
    await h.waitForModel(SERVER);
    const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };
    indexer = new KvIndexer({ bus: h.bus, instanceId: 'idx', logger: quiet, metrics: { inc: () => undefined }, snapshotIntervalMs: 200 });
    await indexer.start();
  }, 120_000);
  afterAll(async () => {
    for (const s of streams) s.close();
    await indexer?.close();
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const chat = async (body: object, id: string): Promise<string> => {
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    await res.text();
    await waitFor(() => accessLines(h).some((l) => l['request_id'] === id), { what: `access line of ${id}` });
    const line = accessLines(h).find((l) => l['request_id'] === id);
    return (line?.['endpoints'] as { aggregated: string[] }).aggregated[0];
  };

  const agreement = async (): Promise<{ computed: number; matched: number }> => {
    const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
    const value = (result: string): number => {
      const m = new RegExp(
        `triad_gateway_kv_key_agreement_keys_total\\{model_server="default/${SERVER}",result="${result}"\\} (\\d+)`,
      ).exec(text);
      return m ? Number(m[1]) : 0;
    };
    return { computed: value('computed'), matched: value('matched') };
  };

  it('the engine names the images; the gateway’s keys are the published blocks; the holder gets the next request', async () => {
    const body = imageChat(1);
    // What the engine renders: token ids with the images expanded, each image's hash and placement.
    const sim = pods.get(`${SERVER}-0`) as SimEngineHandle;
    const render = (await (
      await fetch(`${sim.url}/v1/chat/completions/render`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...body, model: MODEL }),
      })
    ).json()) as {
      token_ids: number[];
      features: { mm_hashes: { image: string[] }; mm_placeholders: { image: { offset: number; length: number }[] } };
    };
    const { mm_hashes, mm_placeholders } = render.features;
    expect(mm_hashes.image).toHaveLength(2);
    expect(new Set(mm_hashes.image).size).toBe(2);
    // Header [system]: 4, 40 words, header [user]: 4, then the images: 256 tokens each (448×448, Qwen2-VL).
    expect(mm_placeholders.image).toEqual([
      { offset: 48, length: 256 },
      { offset: 304, length: 256 },
    ]);
    const mm = mm_hashes.image.map((identifier, i) => ({ identifier, ...mm_placeholders.image[i] }));
    const hasher = new VllmBlockHasher({ algo: 'sha256', seed: '0', blockSize: 16 });
    const keys = hasher.keys(render.token_ids, { mm });
    // 48 + 512 + 20 words + the 3-token generation prompt = 583 tokens: 36 full blocks. The images are extra keys from
    // block 3 on (its tokens are the first image's), so the keys differ from the ids' alone from there.
    expect(keys).toHaveLength(36);
    const idsAlone = hasher.keys(render.token_ids);
    expect(keys.slice(0, 3)).toEqual(idsAlone.slice(0, 3));
    expect(keys.slice(3).some((k, i) => k === idsAlone[3 + i])).toBe(false);

    const renderCalls = () =>
      [...pods.values()].flatMap((p) => p.requests()).filter((r) => r.path === '/v1/chat/completions/render').length;
    const oursOnly = renderCalls();
    const first = await chat(body, 'image-first');
    // The holder published exactly the keys computed from the render answer (images as extra keys), the other nothing.
    await waitFor(() => (stored.get(first)?.length ?? 0) >= keys.length, { what: `${first} to publish the prompt's blocks` });
    expect(stored.get(first)).toEqual(keys);
    // Every key the gateway computed is one an engine reported (settled 5 s after the decision).
    await waitFor(async () => (await agreement()).computed > 0, { what: 'key agreement', timeoutMs: 30_000 });
    expect(await agreement()).toEqual({ computed: keys.length, matched: keys.length });
    for (let i = 0; i < 3; i++) expect(await chat(body, `image-again-${i}`)).toBe(first);
    // The gateway asked the engines' render endpoint (a local tokenizer cannot name an image without a uuid).
    expect(renderCalls()).toBeGreaterThan(oursOnly);
  }, 60_000);
});
