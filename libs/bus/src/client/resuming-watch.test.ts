import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { ResumingWatch, type KvWatchIterator, type WatchEntry } from './resuming-watch';

const text = new TextEncoder();

describe('ResumingWatch against a real nats-server', () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let kv: KV;
  const watches: ResumingWatch[] = [];
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('resuming', { history: 1 });
  });
  afterAll(async () => {
    for (const w of watches) w.stop();
    await nc?.close();
    await server?.close();
  });

  /** A watch on `key` recording what it delivers and every resume revision it opened from. */
  function follow(key: string, hooks: { failOpens?: number; holdSync?: { held: boolean } } = {}) {
    const seen: number[] = [];
    const revisions: number[] = [];
    const opens: number[] = [];
    const iters: KvWatchIterator[] = [];
    const errors: string[] = [];
    let failOpens = hooks.failOpens ?? 0;
    const watch = new ResumingWatch({
      open: async (resumeFrom) => {
        opens.push(resumeFrom);
        if (resumeFrom > 0 && failOpens > 0) {
          failOpens--;
          throw new Error('timeout');
        }
        const iter = (await kv.watch({ key, ...(resumeFrom > 0 ? { resumeFromRevision: resumeFrom } : {}) })) as unknown as KvWatchIterator;
        iters.push(iter);
        return iter;
      },
      deliver: (e: WatchEntry) => {
        const n = Number(new TextDecoder().decode(e.value));
        if (n < 0) throw new Error(`handler refused ${n}`);
        seen.push(n);
        revisions.push(e.revision);
      },
      onDeliverError: (_e, err) => errors.push((err as Error).message),
      progress: async (iter) => {
        // Held: the consumer says it has more to send, so the replay never ends.
        if (hooks.holdSync?.held) return { pending: 1, sent: 0 };
        const info = await iter._data!.info(false);
        return { pending: info.num_pending, sent: info.delivered?.consumer_seq ?? 0 };
      },
      checkEveryMs: 100,
    });
    watches.push(watch);
    return { watch, seen, revisions, opens, iters, errors };
  }

  it('replaces a consumer deleted behind its back, resuming after the last revision: nothing lost or repeated', async () => {
    await kv.put('a', text.encode('1'));
    const w = follow('a');
    await w.watch.start();
    await w.watch.synced;
    await waitFor(() => w.seen.length === 1, { what: 'the current value' });
    const jsm = await jetstreamManager(nc);
    const [consumer] = await jsm.consumers.list('KV_resuming').next();
    expect(consumer).toBeDefined();
    await jsm.consumers.delete('KV_resuming', consumer.name);
    for (let n = 2; n <= 5; n++) await kv.put('a', text.encode(String(n)));
    await waitFor(() => w.seen.at(-1) === 5, { what: 'the writes made while the consumer was gone' });
    // History 1 keeps only the newest value per key, so the resumed consumer may start at 5; never at 1 again.
    expect(w.seen[0]).toBe(1);
    expect(w.seen).toEqual([...w.seen].sort((x, y) => x - y));
    expect(new Set(w.seen).size).toBe(w.seen.length);
    expect(w.opens[0]).toBe(0);
    expect(w.opens[1]).toBe(w.revisions[0] + 1);
  });

  it('replaces an iterator that nats.js ended on its own', async () => {
    await kv.put('b', text.encode('10'));
    const w = follow('b');
    await w.watch.start();
    await waitFor(() => w.seen.length === 1, { what: 'the current value' });
    w.iters[0].stop();
    await waitFor(() => w.opens.length === 2, { what: 'a new consumer' });
    await kv.put('b', text.encode('11'));
    await waitFor(() => w.seen.at(-1) === 11, { what: 'the write after the replacement' });
    expect(w.seen).toEqual([10, 11]);
  });

  it('keeps retrying a replacement that failed until one succeeds', async () => {
    await kv.put('c', text.encode('20'));
    const w = follow('c', { failOpens: 3 });
    await w.watch.start();
    await waitFor(() => w.seen.length === 1, { what: 'the current value' });
    // Synced first: a replay cut short starts over from the beginning (next test), not after a revision.
    await w.watch.synced;
    w.iters[0].stop();
    await waitFor(() => w.iters.length === 2, { what: 'a replacement after three failed opens' });
    expect(w.opens.length).toBe(5);
    await kv.put('c', text.encode('21'));
    await waitFor(() => w.seen.at(-1) === 21, { what: 'the write after the replacement' });
    expect(w.seen).toEqual([20, 21]);
  });

  it('starts a replay cut short over from the beginning, handing no key the same revision twice', async () => {
    await kv.put('e', text.encode('40'));
    const hold = { held: true };
    const w = follow('e', { holdSync: hold });
    await w.watch.start();
    await waitFor(() => w.seen.length === 1, { what: 'the current value' });
    expect(w.watch.isSynced).toBe(false);
    w.iters[0].stop();
    await waitFor(() => w.iters.length === 2, { what: 'a new consumer' });
    expect(w.opens).toEqual([0, 0]);
    hold.held = false;
    await kv.put('e', text.encode('41'));
    await w.watch.synced;
    await waitFor(() => w.seen.at(-1) === 41, { what: 'the write after the restart' });
    expect(w.seen).toEqual([40, 41]);
  });

  it('reports a handler that throws and goes on with the next entry', async () => {
    await kv.put('d', text.encode('30'));
    const w = follow('d');
    await w.watch.start();
    await waitFor(() => w.seen.length === 1, { what: 'the current value' });
    await kv.put('d', text.encode('-1'));
    // History 1: a value overwritten before the consumer sent it is gone from the stream, so -1 must be delivered
    // (and refused) before 31 replaces it.
    await waitFor(() => w.errors.length === 1, { what: 'the refused entry' });
    await kv.put('d', text.encode('31'));
    await waitFor(() => w.seen.at(-1) === 31, { what: 'the entry after the refused one' });
    expect(w.seen).toEqual([30, 31]);
    expect(w.errors).toEqual(['handler refused -1']);
    expect(w.opens).toEqual([0]);
  });

  it('resolves synced at once when nothing matches, and stops delivering once stopped', async () => {
    const w = follow('nothing.here');
    await w.watch.start();
    await expect(w.watch.synced).resolves.toBeUndefined();
    w.watch.stop();
    await kv.put('nothing.here', text.encode('40'));
    // A later put on a watched key proves the server delivered: the stopped watch must not have.
    const probe = follow('nothing.here');
    await probe.watch.start();
    await waitFor(() => probe.seen.length === 1, { what: 'a fresh watch to see the put' });
    expect(w.seen).toEqual([]);
    expect(w.opens).toEqual([0]);
  });

  it('is synced only once every key was delivered while keys are written, never handing a key an older revision', async () => {
    const busy = await new Kvm(nc).create('resuming_busy', { history: 1 });
    const KEYS = 5000;
    // In batches: 5,000 puts at once outwait their request timeout on a busy machine.
    for (let i = 0; i < KEYS; i += 250) await Promise.all(Array.from({ length: 250 }, (_, j) => busy.put(`k${i + j}`, text.encode('0'))));
    let writing = true;
    const writer = (async () => {
      let n = 0;
      while (writing)
        await Promise.all(Array.from({ length: 50 }, () => busy.put(`k${Math.floor(Math.random() * KEYS)}`, text.encode(String(++n)))));
    })();
    try {
      for (let round = 0; round < 3; round++) {
        const last = new Map<string, number>();
        let regressions = 0;
        const watch = new ResumingWatch({
          open: async () => await busy.watch(),
          deliver: (e) => {
            if ((last.get(e.key) ?? 0) >= e.revision) regressions += 1;
            last.set(e.key, e.revision);
          },
          onDeliverError: () => undefined,
          progress: async (iter) => {
            const info = await iter._data!.info(false);
            return { pending: info.num_pending, sent: info.delivered?.consumer_seq ?? 0 };
          },
        });
        watches.push(watch);
        await watch.start();
        await watch.synced;
        const atSync = last.size;
        watch.stop();
        expect([round, atSync, regressions]).toEqual([round, KEYS, 0]);
      }
    } finally {
      writing = false;
      await writer;
    }
  });
});
