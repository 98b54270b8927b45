import { encode } from '@msgpack/msgpack';
import { waitFor } from '@triad/testing';
import { VllmBlockHasher, ZmqEventPublisher, encodeKvEventBatch, type FollowerCounter } from '../src/index';
import { SourceFollower } from '../src/indexer/source-follower';
import { type FollowerLimits, type SourceDelta } from '../src/indexer/follower-types';

// What an engine's event socket can throw at the indexer: floods, more blocks than the cap, gaps it cannot
// replay, garbage. Each is counted, logged once per source with its reason, and the source's blocks stay exact
// or are cleared (never wrong); nothing throws.
const hasher = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 });
const tokens = (base: number, blocks: number): number[] => Array.from({ length: blocks * 4 }, (_, i) => base + i);
const keysOf = (t: number[]): string[] => hasher.keys(t);

class Harness {
  readonly counts = new Map<FollowerCounter, number>();
  readonly deltas: SourceDelta[] = [];
  readonly warnings: { msg: string; fields: Record<string, unknown> }[] = [];
  readonly held = new Set<string>();
  states: { live: boolean; reason: string | undefined }[] = [];
  clock = 1_000_000;
  follower!: SourceFollower;

  constructor(readonly pub: ZmqEventPublisher) {}

  start(limits: FollowerLimits, replay = true): SourceFollower {
    this.follower = new SourceFollower({
      source: 'ns/p',
      pod: 'ns/p',
      endpoint: this.pub.endpoint,
      replayEndpoint: replay ? this.pub.replayEndpoint : undefined,
      limits,
      now: () => this.clock,
      sink: {
        delta: (_s, _p, d) => {
          this.deltas.push(d);
          if (d.clear) this.held.clear();
          for (const k of d.stored) this.held.add(k);
          for (const k of d.removed) this.held.delete(k);
        },
        state: (_s, _p, live, reason) => void this.states.push({ live, reason }),
      },
      metrics: { inc: (c, _pod, n = 1) => void this.counts.set(c, (this.counts.get(c) ?? 0) + n) },
      logger: {
        info: () => undefined,
        warn: (fields, msg) => void this.warnings.push({ msg: msg ?? '', fields: fields as Record<string, unknown> }),
      },
    });
    return this.follower;
  }

  count(c: FollowerCounter): number {
    return this.counts.get(c) ?? 0;
  }

  async store(t: number[], opts: { lose?: boolean } = {}): Promise<string[]> {
    await this.pub.publish(
      encodeKvEventBatch('vllm', 1, [{ type: 'stored', hashes: hasher.digests(t), parent: undefined, tokens: t, blockSize: 4 }]),
      opts,
    );
    return keysOf(t);
  }
}

describe('SourceFollower under bad input', () => {
  const open: { pub: ZmqEventPublisher; follower?: SourceFollower }[] = [];
  const harness = async (limits: FollowerLimits, opts: { replay?: boolean; bufferSteps?: number } = {}): Promise<Harness> => {
    const pub = await ZmqEventPublisher.start({
      endpoint: 'tcp://127.0.0.1:*',
      replayEndpoint: 'tcp://127.0.0.1:*',
      ...(opts.bufferSteps ? { bufferSteps: opts.bufferSteps } : {}),
    });
    const h = new Harness(pub);
    const f = h.start(limits, opts.replay ?? true);
    open.push({ pub, follower: f });
    await waitFor(() => f.live, { what: 'the follower to connect' });
    return h;
  };

  afterAll(async () => {
    for (const { pub, follower } of open) {
      follower?.close();
      await pub.close();
    }
  });

  it('takes a flooding source down with a reason, ignores it for the cool-down, then follows it from scratch', async () => {
    const h = await harness({ maxBlocksPerSecond: 10, floodCooldownMs: 5_000 });
    const first = await h.store(tokens(100, 3));
    await waitFor(() => first.every((k) => h.held.has(k)), { what: 'a normal batch' });
    await h.store(tokens(200, 20));
    await waitFor(() => h.count('floods') === 1, { what: 'the flood' });
    expect(h.follower.live).toBe(false);
    expect(h.follower.reason).toBe('more than 10 blocks/s');
    expect(h.held.size).toBe(0);
    // Within the cool-down nothing is applied.
    const ignored = await h.store(tokens(300, 1));
    const late = await h.store(tokens(400, 1));
    h.clock += 1_000;
    const skipped = await h.store(tokens(500, 1));
    await waitFor(() => h.count('flood_dropped') === 3, { what: 'three batches dropped in the cool-down' });
    expect([...ignored, ...late, ...skipped].some((k) => h.held.has(k))).toBe(false);
    // After it, the next batch starts the source over (no replay of the flood).
    h.clock += 5_000;
    const fresh = await h.store(tokens(600, 2));
    await waitFor(() => fresh.every((k) => h.held.has(k)), { what: 'the source followed again' });
    expect(h.follower.live).toBe(true);
    expect([...h.held]).toEqual(fresh);
    expect(h.count('floods')).toBe(1);
    expect(h.warnings.filter((w) => w.msg.includes('floods'))).toHaveLength(1);
  });

  it('holds at most maxBlocks per source, dropping the least recently stored as removed', async () => {
    const h = await harness({ maxBlocks: 5 });
    const a = await h.store(tokens(100, 3));
    const b = await h.store(tokens(200, 4));
    await waitFor(() => b.every((k) => h.held.has(k)), { what: 'the second batch' });
    expect(h.follower.blocks.size).toBe(5);
    expect([...h.held]).toEqual([...a.slice(2), ...b]);
    expect(h.count('evicted_blocks')).toBe(2);
  });

  it('resyncs on a gap it cannot replay (no replay socket), warning once however often it happens', async () => {
    const h = await harness({}, { replay: false });
    const before = await h.store(tokens(100, 2));
    await waitFor(() => before.every((k) => h.held.has(k)), { what: 'the first batch' });
    await h.store(tokens(200, 1), { lose: true });
    const after = await h.store(tokens(300, 1));
    await waitFor(() => after.every((k) => h.held.has(k)), { what: 'the batch after the gap' });
    // What happened before the gap is unknown now: not claimed.
    expect([...h.held]).toEqual(after);
    await h.store(tokens(400, 1), { lose: true });
    const again = await h.store(tokens(500, 1));
    await waitFor(() => again.every((k) => h.held.has(k)), { what: 'the batch after the second gap' });
    expect(h.count('gaps')).toBe(2);
    expect(h.count('resyncs')).toBe(2);
    expect(h.warnings.filter((w) => w.msg.includes('sequence gap'))).toHaveLength(1);
    expect(h.warnings.find((w) => w.msg.includes('resynced'))?.fields['why']).toMatch(/no replay socket/);
  });

  it('resyncs when the replay buffer no longer reaches back to the gap', async () => {
    const h = await harness({}, { bufferSteps: 2 });
    const before = await h.store(tokens(100, 1));
    await waitFor(() => before.every((k) => h.held.has(k)), { what: 'the first batch' });
    for (let i = 0; i < 3; i++) await h.store(tokens(200 + i * 10, 1), { lose: true });
    const after = await h.store(tokens(300, 1));
    await waitFor(() => after.every((k) => h.held.has(k)) && h.count('resyncs') === 1, { what: 'the resync' });
    expect(h.held.has(before[0])).toBe(false);
    expect(h.warnings.some((w) => w.msg.includes('replay buffer does not reach the gap'))).toBe(true);
  });

  it('counts every malformed message (bad msgpack, wrong frames, bad fields) but warns once, and stays live', async () => {
    const h = await harness({});
    await h.pub.publish(Buffer.from([0xc1]));
    await h.pub.publish(encode({ ts: 'yesterday', events: [] }));
    await h.pub.publish(encode([1, [{ type: 'BlockStored', block_hashes: 'nope', token_ids: [], block_size: 4 }], 0]));
    await h.pub.sendRaw(['', 'no sequence frame']);
    const ok = await h.store(tokens(100, 1));
    await waitFor(() => ok.every((k) => h.held.has(k)) && h.count('malformed') === 4, { what: 'four malformed, then a good batch' });
    expect(h.follower.live).toBe(true);
    expect(h.warnings.filter((w) => w.msg.includes('malformed'))).toHaveLength(1);
    expect(h.warnings.find((w) => w.msg.includes('malformed'))?.fields['why']).toBeTruthy();
  });
});
