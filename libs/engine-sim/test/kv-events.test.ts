import { resolve } from 'node:path';
import { decode } from '@msgpack/msgpack';
import {
  EventStream,
  VllmBlockHasher,
  decodeKvEventBatch,
  loadTokenizer,
  sglangBlockKeys,
  type KvEvent,
  type StreamMessage,
} from '@triad/kv-events';
import { waitFor } from '@triad/testing';
import { SimFleet, post } from './helpers';

const tokenizerDir = resolve(__dirname, '../../../infra/tokenizers/bert-base-uncased');
const tokenizer = loadTokenizer(tokenizerDir);
const hasher = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 });
const CAPACITY_BLOCKS = 30;
const words = (seed: string, n: number): string => Array.from({ length: n }, (_, i) => `${seed}${i % 7} word${i}`).join(' ');

/** A subscriber on a sim's event socket that keeps every message, decoded. */
class Listener {
  readonly messages: (StreamMessage & { events: readonly KvEvent[]; rank: number | undefined })[] = [];
  readonly stream: EventStream;
  connected = false;

  constructor(endpoint: string, replayEndpoint?: string) {
    this.stream = new EventStream(
      { endpoint, replayEndpoint },
      {
        onMessage: (m) => {
          const batch = decodeKvEventBatch(m.payload);
          this.messages.push({ ...m, events: batch.events, rank: batch.dpRank });
        },
        onMalformed: (why) => {
          throw new Error(why);
        },
        onConnection: (up) => (this.connected = up),
      },
    );
  }

  events(): KvEvent[] {
    return this.messages.flatMap((m) => m.events);
  }

  stored(): string[] {
    return this.events().flatMap((e) => (e.type === 'stored' ? e.hashes : []));
  }

  removed(): string[] {
    return this.events().flatMap((e) => (e.type === 'removed' ? e.hashes : []));
  }
}

describe('engine sims publish KV events from their prefix caches', () => {
  const fleet = new SimFleet();
  const listeners: Listener[] = [];
  const listen = async (endpoint: string, replay?: string): Promise<Listener> => {
    const l = new Listener(endpoint, replay);
    listeners.push(l);
    await waitFor(() => l.connected, { what: 'the subscriber to connect' });
    return l;
  };

  afterAll(async () => {
    for (const l of listeners) l.stream.close();
    await fleet.closeAll();
  });

  it("vLLM: BlockStored with the engine's block hashes and tokens, BlockRemoved on eviction, AllBlocksCleared on reset", async () => {
    const sim = await fleet.start({
      engine: 'vllm',
      role: 'both',
      latency: { kvCapacityTokens: 4 * CAPACITY_BLOCKS },
      kvEvents: {
        endpoint: 'tcp://127.0.0.1:*',
        replayEndpoint: 'tcp://127.0.0.1:*',
        tokenizer: tokenizerDir,
        blockSize: 4,
        hashAlgo: 'sha256_cbor',
      },
    });
    const [ends] = sim.kvEventEndpoints ?? [];
    const l = await listen(ends?.endpoint);
    const first = words('alpha', 20);
    const tokens = tokenizer.encode(first, true);
    const expected = hasher.keys(tokens);
    expect(expected.length).toBeGreaterThanOrEqual(5);
    expect(expected.length).toBeLessThanOrEqual(CAPACITY_BLOCKS);
    expect((await post(`${sim.url}/v1/completions`, { model: 'sim-model', prompt: first, max_tokens: 2 })).status).toBe(200);
    await waitFor(() => l.stored().length === expected.length, { what: "the first prompt's blocks" });
    expect(l.stored()).toEqual(expected);
    const stored = l.events().find((e) => e.type === 'stored');
    expect(stored).toMatchObject({ parent: undefined, blockSize: 4, medium: 'GPU', tokens: tokens.slice(0, expected.length * 4) });
    // The raw payload is vLLM's: an array batch whose events are maps tagged `type`, hashes as bytes.
    const raw = decode(l.messages[0]?.payload) as [number, Record<string, unknown>[], number];
    expect(raw[1][0]?.['type']).toBe('BlockStored');
    expect(raw[1][0]?.['block_hashes']).toEqual(hasher.digests(tokens).map((d) => new Uint8Array(d)));
    expect(raw[2]).toBe(0);

    // The same prompt again hits the cache: nothing new is stored.
    await post(`${sim.url}/v1/completions`, { model: 'sim-model', prompt: first, max_tokens: 2 });
    // A longer prompt sharing the prefix stores only its new blocks, chained to the last shared one.
    const longer = `${first} ${words('beta', 6)}`;
    const longerKeys = hasher.keys(tokenizer.encode(longer, true));
    await post(`${sim.url}/v1/completions`, { model: 'sim-model', prompt: longer, max_tokens: 2 });
    await waitFor(() => l.stored().length === longerKeys.length, { what: "the longer prompt's new blocks" });
    const second = l.events().filter((e) => e.type === 'stored')[1];
    expect(second?.type === 'stored' && second.parent).toBe(expected[expected.length - 1]);
    expect(l.stored()).toEqual(longerKeys);

    // A different prompt overflows the cache: the least recently used blocks go, announced as removed.
    const other = words('gamma', 20);
    const otherKeys = hasher.keys(tokenizer.encode(other, true));
    await post(`${sim.url}/v1/completions`, { model: 'sim-model', prompt: other, max_tokens: 2 });
    const overflow = longerKeys.length + otherKeys.length - CAPACITY_BLOCKS;
    expect(overflow).toBeGreaterThan(0);
    await waitFor(() => l.removed().length === overflow, { what: 'evictions' });
    expect(l.removed()).toEqual(longerKeys.slice(0, overflow));

    expect((await post(`${sim.url}/reset_prefix_cache`, '')).status).toBe(200);
    await waitFor(() => l.events().some((e) => e.type === 'cleared'), { what: 'AllBlocksCleared' });
    const seqs = l.messages.map((m) => m.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i));
  });

  it('vLLM: a restart starts the sequence over, and the replay socket serves the buffered batches', async () => {
    const sim = await fleet.start({
      engine: 'vllm',
      role: 'both',
      kvEvents: { endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', tokenizer: tokenizerDir, blockSize: 4 },
    });
    const ends = sim.kvEventEndpoints?.[0];
    const l = await listen(ends?.endpoint as string, ends?.replayEndpoint);
    for (const seed of ['one', 'two', 'three']) await post(`${sim.url}/v1/completions`, { prompt: words(seed, 8), max_tokens: 1 });
    await waitFor(() => l.messages.length === 3, { what: 'three batches' });
    const replayed = await l.stream.replay(1);
    expect(replayed.ok && replayed.messages.map((m) => m.seq)).toEqual([1, 2]);
    expect(replayed.ok && replayed.messages[0]?.payload).toEqual(l.messages[1]?.payload);

    sim.restartKvCache();
    await post(`${sim.url}/v1/completions`, { prompt: words('one', 8), max_tokens: 1 });
    await waitFor(() => l.messages.length === 4, { what: 'the batch after the restart' });
    expect(l.messages[3]?.seq).toBe(0);
    // The restarted engine holds nothing, so the first prompt is stored again.
    expect(l.messages[3]?.events[0]).toMatchObject({
      type: 'stored',
      hashes: l.messages[0]?.events[0]?.type === 'stored' ? l.messages[0].events[0].hashes : [],
    });
  });

  it('SGLang: tagged arrays with int64 page hashes, one PUB socket per DP rank on port + rank', async () => {
    const sim = await fleet.start({
      engine: 'sglang',
      role: 'both',
      dataParallel: 2,
      kvEvents: { endpoint: 'tcp://127.0.0.1:*', tokenizer: tokenizerDir, blockSize: 4 },
    });
    const ranks = sim.kvEventEndpoints ?? [];
    expect(ranks).toHaveLength(2);
    const l0 = await listen(ranks[0]?.endpoint);
    const l1 = await listen(ranks[1]?.endpoint);
    const text = words('delta', 10);
    await post(`${sim.url}/generate`, { text, sampling_params: { max_new_tokens: 1 }, data_parallel_rank: 1 });
    await waitFor(() => l1.stored().length > 0, { what: 'rank 1 events' });
    expect(l1.stored()).toEqual(sglangBlockKeys(tokenizer.encode(text, true), 4));
    expect(l1.messages[0]?.rank).toBe(1);
    expect(l0.messages).toHaveLength(0);
    const raw = decode(l1.messages[0]?.payload, { useBigInt64: true }) as [number, unknown[][], number];
    expect(raw[1][0]?.[0]).toBe('BlockStored');
    expect(typeof (raw[1][0]?.[1] as unknown[])[0]).toBe('bigint');

    expect((await post(`${sim.url}/flush_cache`, '')).status).toBe(200);
    await waitFor(() => l0.events().some((e) => e.type === 'cleared') && l1.events().some((e) => e.type === 'cleared'), {
      what: 'AllBlocksCleared on both ranks',
    });
  });

  it('refuses a bad kvEvents config before listening', async () => {
    await expect(
      fleet.start({ engine: 'vllm', role: 'both', kvEvents: { endpoint: 'ipc:///nope', tokenizer: tokenizerDir } }),
    ).rejects.toThrow(/tcp:\/\/HOST:PORT/);
    await expect(
      fleet.start({ engine: 'vllm', role: 'both', kvEvents: { endpoint: 'tcp://127.0.0.1:*', tokenizer: '/no/such/dir' } }),
    ).rejects.toThrow();
  });
});
