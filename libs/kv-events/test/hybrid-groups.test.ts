import { join } from 'node:path';
import { KvBlockIndex } from '@triad/scheduling';
import { waitFor } from '@triad/testing';
import type { KvGroupSpec } from '@triad/bus';
import { VllmBlockHasher, ZmqEventPublisher, loadTokenizer, tokenizePrompt } from '../src/index';
import { SourceFollower } from '../src/indexer/source-follower';
import fixtures from './parity/parity-fixtures.json';
import spec from './parity/cases.json';
import { TOKENIZER_FILES } from './parity/tokenizer-files';

/**
 * A hybrid model's event stream as vLLM publishes it (parity-fixtures.json, from make_parity_fixtures.py: a
 * full-attention group of 32-token blocks and a 64-token sliding window of 16-token blocks, chained at 16; then the
 * window group's three oldest blocks evicted) goes through a real ZMQ socket and Triad's follower into a
 * KvBlockIndex, and Triad's own keys for the same request must match the whole prompt.
 */
const NAME = 'hybrid model: full attention 32 + sliding window 16';
const fixture = (fixtures as { fixtures: { name: string; ids: number[]; eventBatches: string[] }[] }).fixtures.find((f) => f.name === NAME);
const hybridCase = (spec as { cases: { name: string; messages: unknown[] }[] }).cases.find((c) => c.name === NAME);

describe('hybrid-model KV events', () => {
  let pub: ZmqEventPublisher;
  let follower: SourceFollower | undefined;
  const index = new KvBlockIndex();
  const groups: KvGroupSpec[][] = [];

  beforeAll(async () => {
    pub = await ZmqEventPublisher.start({ endpoint: 'tcp://127.0.0.1:*' });
  });
  afterAll(async () => {
    follower?.close();
    await pub.close();
  });

  it('keeps each group apart, and the gateway keys match the full prompt', async () => {
    if (!fixture || !hybridCase) throw new Error('fixture missing');
    follower = new SourceFollower({
      source: 'ns/hybrid',
      pod: 'ns/hybrid',
      endpoint: pub.endpoint,
      sink: {
        delta: (source, pod, d) => {
          if (d.clear) index.clear(source);
          index.store(source, pod, d.stored);
          index.remove(source, d.removed);
        },
        state: (source, pod, live) => {
          index.setLive(source, pod, live);
          const g = [...(follower?.groups.values() ?? [])];
          groups.push(g);
          index.setGroups(source, pod, g);
        },
      },
      metrics: { inc: () => undefined },
      logger: { info: () => undefined, warn: () => undefined },
    });
    await waitFor(() => follower?.live === true);
    for (const hex of fixture.eventBatches) await pub.publish(Buffer.from(hex, 'hex'));
    // Group 0 stores 5 blocks of 32 tokens, group 1 11 blocks of 16, then loses its first 3.
    await waitFor(() => (follower?.blocks.size ?? 0) === 5 + 11 - 3);

    // The tokenizer and hash the gateway uses, on the same request: keys at hash_block_size 16.
    const t = loadTokenizer(TOKENIZER_FILES.qwen, {
      configDir: join(__dirname, 'parity/models/qwen2.5-instruct'),
    });
    const { ids } = tokenizePrompt(t, { messages: hybridCase.messages });
    expect(ids).toEqual(fixture.ids);
    const keys = new VllmBlockHasher({ algo: 'sha256', seed: '0', blockSize: 16 }).keys(ids);
    expect(keys).toHaveLength(11);

    expect(groups.at(-1)).toEqual([
      { idx: 0, blockSize: 32, kind: 'full_attention' },
      { idx: 1, blockSize: 16, kind: 'sliding_window', slidingWindow: 64 },
    ]);
    // Both groups store the same hash for tokens 0–31; removing it from the window's group keeps group 0's.
    const hits: [string, number][] = [];
    index.prefixMatches(keys, (pod, blocks) => hits.push([pod, blocks]), 16);
    // 11 blocks of 16 tokens: group 0 holds 5 blocks of 32 (160 tokens), the window group the 4 blocks before 160
    // its window needs, so both agree on 160 tokens = 10 blocks.
    expect(hits).toEqual([['ns/hybrid', 10]]);
    // Without the groups (the old reading: one chain, removals deleting every group's block) nothing matches.
    const flat = new KvBlockIndex();
    flat.setLive('s', 'ns/flat', true);
    flat.store(
      's',
      'ns/flat',
      [...(follower?.blocks ?? [])].map((k) => k.split('~')[0]),
    );
    for (const k of [...(follower?.blocks ?? [])]) if (k.includes('~')) flat.remove('s', [k.split('~')[0]]);
    const flatHits: number[] = [];
    flat.prefixMatches(keys, (_pod, blocks) => flatHits.push(blocks));
    expect(flatHits).toEqual([]);
  });
});
