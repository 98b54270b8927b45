import { Writable } from 'node:stream';
import { createLogger } from '@triad/runtime';
import { waitFor } from '@triad/testing';
import { KvPublisher, type KvTarget } from './kv-publisher';

const logger = createLogger({
  service: 'test',
  destination: new Writable({
    write(_c, _e, cb) {
      cb();
    },
  }),
});

/** A KV bucket in memory that records every operation and can hold writes or fail them. */
class MemoryKv implements KvTarget<number> {
  readonly data = new Map<string, number>();
  readonly ops: string[] = [];
  hold: Promise<void> | undefined;
  fail = false;
  keysCalls = 0;
  /** Holds every write until the returned function is called (writes made after that go through at once). */
  holdWrites(): () => void {
    let release: () => void = () => undefined;
    this.hold = new Promise((r) => {
      release = r;
    });
    return () => {
      this.hold = undefined;
      release();
    };
  }
  async put(key: string, value: number): Promise<number> {
    await this.hold;
    if (this.fail) throw new Error('nats down');
    this.ops.push(`put ${key}=${value}`);
    this.data.set(key, value);
    return this.ops.length;
  }
  async delete(key: string): Promise<void> {
    await this.hold;
    if (this.fail) throw new Error('nats down');
    this.ops.push(`del ${key}`);
    this.data.delete(key);
  }
  async keys(): Promise<string[]> {
    this.keysCalls++;
    if (this.fail) throw new Error('nats down');
    return [...this.data.keys()];
  }
}

function publisher(onWriteError: (err: Error) => void = () => undefined) {
  return new KvPublisher<number>({ bucket: 'b', same: (a, b) => a === b, owns: (k) => k.startsWith('mine.'), logger, onWriteError });
}

describe('KV publisher', () => {
  it('writes nothing until enabled and synced, then only changes', async () => {
    const kv = new MemoryKv();
    const p = publisher();
    p.set('mine.a', 1);
    await new Promise((r) => setImmediate(r));
    expect(kv.ops).toEqual([]);
    p.setEnabled(true);
    await p.fullSync(kv);
    expect(kv.ops).toEqual(['put mine.a=1']);
    p.set('mine.a', 1);
    p.set('mine.b', 2);
    await p.whenSettled();
    expect(kv.ops).toEqual(['put mine.a=1', 'put mine.b=2']);
  });

  it('coalesces changes of a key while its write is in flight and keeps put/delete order', async () => {
    const kv = new MemoryKv();
    const p = publisher();
    p.setEnabled(true);
    await p.fullSync(kv);
    const release = kv.holdWrites();
    p.set('mine.a', 1);
    await waitFor(() => p.settled === false);
    await new Promise((r) => setImmediate(r));
    p.set('mine.a', 2);
    p.set('mine.a', 3);
    p.remove('mine.a');
    p.set('mine.a', 4);
    release();
    await p.whenSettled();
    expect(kv.ops).toEqual(['put mine.a=1', 'put mine.a=4']);
    p.remove('mine.a');
    await p.whenSettled();
    expect(kv.ops.at(-1)).toBe('del mine.a');
    expect(kv.data.size).toBe(0);
  });

  it('full sync rewrites everything and deletes only owned stray keys', async () => {
    const kv = new MemoryKv();
    kv.data.set('mine.gone', 9);
    kv.data.set('theirs.x', 9);
    const p = publisher();
    p.set('mine.a', 1);
    p.setEnabled(true);
    await p.fullSync(kv);
    expect([...kv.data.entries()].sort()).toEqual([
      ['mine.a', 1],
      ['theirs.x', 9],
    ]);
  });

  it('reports a failed write, stops writing, and recovers through a full sync', async () => {
    const kv = new MemoryKv();
    const errors: string[] = [];
    const p = publisher((e) => errors.push(e.message));
    p.setEnabled(true);
    await p.fullSync(kv);
    kv.fail = true;
    p.set('mine.a', 1);
    await waitFor(() => errors.length === 1);
    p.set('mine.b', 2);
    await new Promise((r) => setImmediate(r));
    expect(errors).toHaveLength(1);
    await expect(p.fullSync(kv)).rejects.toThrow('nats down');
    kv.fail = false;
    await p.fullSync(kv);
    await p.whenSettled();
    expect([...kv.data.entries()].sort()).toEqual([
      ['mine.a', 1],
      ['mine.b', 2],
    ]);
  });
});

/** `mine.a` synced as 1, then set to 2, whose write is held in flight until `release()`. */
async function writeOfTwoInFlight() {
  const kv = new MemoryKv();
  const p = publisher();
  p.setEnabled(true);
  p.set('mine.a', 1);
  await p.fullSync(kv);
  const release = kv.holdWrites();
  p.set('mine.a', 2);
  await waitFor(() => !p.settled);
  await new Promise((r) => setImmediate(r));
  return { kv, p, release };
}

describe('KV publisher, a key changing back while its write is in flight', () => {
  it('writes the value back instead of leaving the in-flight one in KV', async () => {
    const { kv, p, release } = await writeOfTwoInFlight();
    p.set('mine.a', 1);
    release();
    await p.whenSettled();
    expect(kv.data.get('mine.a')).toBe(1);
    expect(kv.ops).toEqual(['put mine.a=1', 'put mine.a=2', 'put mine.a=1']);
  });
});

describe('KV publisher, the same value set again while its write is in flight', () => {
  it('writes it once (a scrape landing during a slow write does not queue a second write)', async () => {
    const { kv, p, release } = await writeOfTwoInFlight();
    p.set('mine.a', 2);
    p.set('mine.a', 2);
    release();
    await p.whenSettled();
    expect(kv.ops).toEqual(['put mine.a=1', 'put mine.a=2']);
  });
});

describe('KV publisher, two full syncs asked for at once', () => {
  it('runs them one after the other, and writes nothing twice', async () => {
    const kv = new MemoryKv();
    const p = publisher();
    p.setEnabled(true);
    p.set('mine.a', 1);
    const release = kv.holdWrites();
    // The writer's sync (rewrite) and a shard resync (no rewrite), as when a lease is won during a resync.
    const first = p.fullSync(kv);
    const second = p.fullSync(kv, { rewrite: false });
    await new Promise((r) => setImmediate(r));
    expect(kv.keysCalls).toBe(1);
    release();
    await first;
    await second;
    expect(kv.keysCalls).toBe(2);
    await p.whenSettled();
    expect(kv.ops).toEqual(['put mine.a=1']);
  });
});

describe('KV publisher, a sharded key handed away while its write is in flight', () => {
  it('forgets the write, so the key is written again when it comes back (under this replica, not its last owner)', async () => {
    const kv = new MemoryKv();
    const shard = new Set(['mine.a']);
    const p = new KvPublisher<number>({
      bucket: 'b',
      same: (a, b) => a === b,
      owns: (k) => k.startsWith('mine.'),
      writes: (k) => shard.has(k),
      logger,
      onWriteError: () => undefined,
    });
    p.setEnabled(true);
    await p.fullSync(kv);
    const release = kv.holdWrites();
    p.set('mine.a', 1);
    await waitFor(() => !p.settled);
    await new Promise((r) => setImmediate(r));
    // The shares change while the put is in flight: another replica owns the key now and writes its own value.
    shard.delete('mine.a');
    p.reshard();
    release();
    await p.whenSettled();
    kv.data.set('mine.a', 99);
    // It comes back with the same value this replica had put: still news, since KV holds the other replica's.
    shard.add('mine.a');
    p.reshard();
    p.set('mine.a', 1);
    await p.whenSettled();
    expect(kv.data.get('mine.a')).toBe(1);
    expect(kv.ops).toEqual(['put mine.a=1', 'put mine.a=1']);
  });
});
