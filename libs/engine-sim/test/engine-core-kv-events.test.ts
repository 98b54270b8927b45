import { resolve } from 'node:path';
import { EventStream, VllmBlockHasher, decodeKvEventBatch, loadTokenizer, type KvEvent } from '@triad/kv-events';
import { waitFor } from '@triad/testing';
import { SimFleet, post } from './helpers';

const tokenizerDir = resolve(__dirname, '../../../infra/tokenizers/bert-base-uncased');
const tokenizer = loadTokenizer(tokenizerDir);
const hasher = new VllmBlockHasher({ algo: 'sha256', seed: '0', blockSize: 16 });
/** KV pool of the engine core: 12 blocks of 16 tokens. */
const POOL_BLOCKS = 12;
const WORDS = ['cat', 'dog', 'sun', 'sea', 'red', 'box', 'car', 'hat', 'pen', 'tea', 'war', 'web'];
/**
 * 70 three-letter words: one token each for the tokenizer (72 with [CLS]/[SEP]) and four characters each for the
 * simulator (71 tokens): four full blocks either way. Distinct per `seed`.
 */
const prompt = (seed: number): string =>
  Array.from({ length: 70 }, (_, i) => WORDS[(seed * 5 + i * (seed + 1)) % WORDS.length]).join(' ') + ' ';

describe('the engine core publishes KV events from its block pool (vLLM block_pool.py)', () => {
  const fleet = new SimFleet();
  const events: KvEvent[] = [];
  let connected = false;
  let stream: EventStream | undefined;
  afterAll(async () => {
    stream?.close();
    await fleet.closeAll();
  });

  it('BlockStored when a prefix is cached (the keys a router computes), hits on it, BlockRemoved on eviction, AllBlocksCleared on reset', async () => {
    const sim = await fleet.start({
      engine: 'vllm',
      role: 'both',
      latencyProfile: 'realistic',
      latency: { kvCapacityTokens: 16 * POOL_BLOCKS, decodeMsPerToken: 2, prefillMsPer1kTokens: 10 },
      engineCore: { maxNumSeqs: 4 },
      kvEvents: { endpoint: 'tcp://127.0.0.1:*', tokenizer: tokenizerDir, blockSize: 16, hashAlgo: 'sha256', hashSeed: '0' },
    });
    stream = new EventStream(
      { endpoint: sim.kvEventEndpoints?.[0]?.endpoint as string, replayEndpoint: undefined },
      {
        onMessage: (m) => events.push(...decodeKvEventBatch(m.payload).events),
        onMalformed: (why) => {
          throw new Error(why);
        },
        onConnection: (up) => (connected = up),
      },
    );
    await waitFor(() => connected, { what: 'the subscriber to connect' });
    const stored = () => events.flatMap((e) => (e.type === 'stored' ? e.hashes : []));
    const removed = () => events.flatMap((e) => (e.type === 'removed' ? e.hashes : []));
    const complete = (p: string) => post(`${sim.url}/v1/completions`, { model: 'sim-model', prompt: p, max_tokens: 2, ignore_eos: true });

    const first = prompt(0);
    const ids = tokenizer.encode(first, true);
    const keys = hasher.keys(ids);
    expect(keys).toHaveLength(4);
    expect((await complete(first)).status).toBe(200);
    await waitFor(() => stored().length === keys.length, { what: "the first prompt's blocks stored" });
    expect(stored()).toEqual(keys);
    expect(events.find((e) => e.type === 'stored')).toMatchObject({ parent: undefined, blockSize: 16, tokens: ids.slice(0, 64) });

    // The same prompt again is a prefix hit on those blocks (all four: the last prompt token is always computed),
    // and stores nothing new.
    const before = sim.counters()['prefixHitTokens'] ?? 0;
    expect((await complete(first)).status).toBe(200);
    expect((sim.counters()['prefixHitTokens'] ?? 0) - before).toBe(64);
    expect(stored()).toHaveLength(keys.length);

    // Other prompts take the pool's free blocks, oldest freed first: the first prompt's blocks are evicted and
    // announced as removed, each once.
    for (let seed = 1; seed <= 6 && !keys.every((k) => removed().includes(k)); seed++) {
      expect((await complete(prompt(seed))).status).toBe(200);
      await waitFor(() => stored().length >= keys.length * (seed + 1), { what: `prompt ${seed}'s blocks stored` });
    }
    await waitFor(() => keys.every((k) => removed().includes(k)), { what: "the first prompt's blocks removed" });
    expect(new Set(removed()).size).toBe(removed().length);
    for (const k of removed()) expect(stored()).toContain(k);

    expect((await post(`${sim.url}/reset_prefix_cache`, '')).status).toBe(200);
    await waitFor(() => events.some((e) => e.type === 'cleared'), { what: 'AllBlocksCleared' });
  });
});
