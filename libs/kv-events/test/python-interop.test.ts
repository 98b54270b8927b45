import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { encode } from '@msgpack/msgpack';
import { waitFor } from '@triad/testing';
import { VllmBlockHasher, type FollowerCounter } from '../src/index';
import { SourceFollower } from '../src/indexer/source-follower';
import { type SourceDelta } from '../src/indexer/follower-types';

// The indexer against a publisher written in Python with the libraries vLLM itself puts on the wire (pyzmq,
// msgpack) and vLLM's own block hash (pickle protocol 5 + SHA-256, PYTHONHASHSEED 0): Debian's python3-zmq and
// python3-msgpack, which `.ci/run` installs.
const PYTHON = '/usr/bin/python3';
const SCRIPT = join(__dirname, 'interop', 'vllm_publisher.py');
const hasher = new VllmBlockHasher({ algo: 'sha256', seed: '0', blockSize: 16 });
const tokens = (base: number, blocks: number): number[] => Array.from({ length: blocks * 16 }, (_, i) => base + i);

class Publisher {
  readonly child: ChildProcessWithoutNullStreams;
  readonly lines: string[] = [];

  constructor() {
    this.child = spawn(PYTHON, [SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.child.stdout }).on('line', (l) => this.lines.push(l));
    this.child.stderr.on('data', (d: Buffer) => this.lines.push(`stderr: ${d.toString()}`));
  }

  async ports(): Promise<[number, number]> {
    await waitFor(() => this.lines.some((l) => l.startsWith('ready ')), { what: `the python publisher: ${this.lines.join('\n')}` });
    const [, pub, replay] = (this.lines.find((l) => l.startsWith('ready ')) as string).split(' ');
    return [Number(pub), Number(replay)];
  }

  /** Sends one command and waits until the batch went out (or was kept back, with `lose`). */
  async send(cmd: object): Promise<void> {
    const sent = this.lines.filter((l) => l.startsWith('sent ')).length;
    this.child.stdin.write(`${JSON.stringify(cmd)}\n`);
    await waitFor(() => this.lines.filter((l) => l.startsWith('sent ')).length > sent, { what: 'the batch to be sent' });
  }

  async close(): Promise<void> {
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.stdin.end();
    await exited;
  }
}

describe("KV events from a Python publisher (pyzmq + msgpack, vLLM's hashing)", () => {
  let publisher: Publisher;
  let follower: SourceFollower;
  const counts = new Map<FollowerCounter, number>();
  const deltas: SourceDelta[] = [];
  const warnings: string[] = [];
  /** The source's blocks as the deltas describe them. */
  const held = new Set<string>();

  beforeAll(async () => {
    publisher = new Publisher();
    const [pub, replay] = await publisher.ports();
    follower = new SourceFollower({
      source: 'ns/py',
      pod: 'ns/py',
      endpoint: `tcp://127.0.0.1:${pub}`,
      replayEndpoint: `tcp://127.0.0.1:${replay}`,
      sink: {
        delta: (_s, _p, d) => {
          deltas.push(d);
          if (d.clear) held.clear();
          for (const k of d.stored) held.add(k);
          for (const k of d.removed) held.delete(k);
        },
        state: () => undefined,
      },
      metrics: { inc: (c, _pod, n = 1) => void counts.set(c, (counts.get(c) ?? 0) + n) },
      logger: { info: () => undefined, warn: (_o, msg) => void warnings.push(msg ?? '') },
    });
    await waitFor(() => follower.live, { what: 'the follower to connect to the python publisher' });
  });

  afterAll(async () => {
    follower?.close();
    await publisher?.close();
  });

  it('indexes vLLM-shaped batches: map and array events, bytes and int hashes, removals and clears', async () => {
    const a = tokens(1000, 3);
    const b = tokens(2000, 2);
    const c = tokens(3000, 2);
    await publisher.send({ stored: a, form: 'map' });
    await publisher.send({ stored: b, form: 'array' });
    await publisher.send({ stored: c, form: 'map', int_hashes: true });
    const expected = [...hasher.keys(a), ...hasher.keys(b), ...hasher.keys(c)];
    await waitFor(() => expected.every((k) => held.has(k)), { what: `blocks of three batches; warnings: ${warnings.join('; ')}` });
    expect([...follower.blocks]).toEqual(expected);
    expect(follower.blockSize).toBe(16);

    await publisher.send({ removed: b });
    await waitFor(() => !held.has(hasher.keys(b)[0]), { what: 'the removal' });
    expect([...held]).toEqual([...hasher.keys(a), ...hasher.keys(c)]);

    await publisher.send({ cleared: true });
    await waitFor(() => held.size === 0 && follower.blocks.size === 0, { what: 'AllBlocksCleared' });
    expect(counts.get('malformed') ?? 0).toBe(0);
  });

  it('replays a batch the transport lost from the python ROUTER', async () => {
    const lost = tokens(4000, 2);
    const next = tokens(5000, 1);
    await publisher.send({ stored: lost, lose: true });
    await publisher.send({ stored: next });
    await waitFor(() => [...hasher.keys(lost), ...hasher.keys(next)].every((k) => held.has(k)), { what: 'the replayed batch' });
    expect(counts.get('gaps')).toBe(1);
    // At least the gap's; joining can take one more when the subscription was not in place for batch 0 (PUB/SUB).
    expect(counts.get('replays')).toBeGreaterThanOrEqual(1);
    expect(counts.get('replay_failures') ?? 0).toBe(0);
  });

  it('counts a malformed payload and an unknown event type from Python, and keeps following', async () => {
    await publisher.send({ raw: Buffer.from('not msgpack at all').toString('hex') });
    await publisher.send({ raw: Buffer.from(encode([1.5, [{ type: 'BlockMoved' }], 0])).toString('hex') });
    const after = tokens(6000, 1);
    await publisher.send({ stored: after });
    await waitFor(() => held.has(hasher.keys(after)[0]), { what: 'the batch after the bad ones' });
    expect(counts.get('malformed')).toBe(1);
    expect(counts.get('unknown_events')).toBe(1);
    expect(warnings).toEqual(expect.arrayContaining(['malformed KV-event message skipped', 'unknown KV event type skipped']));
  });
});
