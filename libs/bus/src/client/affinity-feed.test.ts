import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { Subjects } from '../names';
import { AffinityBatchSchema, type AffinityRecord } from '../affinity';
import { decodeMessage } from '../codec';
import { connectBus, type Bus } from './bus';
import { startAffinityFeed } from './affinity-feed';

const record = (endpoint: string): AffinityRecord => ({
  model: 'm',
  endpoint,
  role: 'encode',
  prefixHashes: [],
  mediaKeys: [`k-${endpoint}`],
});

describe('affinity feed with a coalescing window, on a real nats-server', () => {
  let nats: NatsServerHandle;
  let a: Bus;
  let b: Bus;
  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    a = await connectBus({ servers: nats.url, name: 'replica-a' });
    b = await connectBus({ servers: nats.url, name: 'replica-b' });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await nats?.close();
  });

  /** The windows `origin` sends, as their records' endpoints, seen by b (subscribed on the server when it returns). */
  async function windowsFrom(origin: string) {
    const learned: string[][] = [];
    const sub = b.subscribe(Subjects.affinity, AffinityBatchSchema, (batch) => {
      if (batch.origin === origin) learned.push(batch.records.map((r) => r.endpoint));
    });
    await b.nc.flush();
    return { learned, sub };
  }

  it("sends the records of a window as one message, applies only the others' records, and sends what is pending on stop", async () => {
    let messages = 0;
    a.nc.subscribe(Subjects.affinity, {
      callback: () => {
        messages++;
      },
    });
    await a.nc.flush();
    const learnedByB: string[] = [];
    const learnedByA: string[] = [];
    // A window no test run outlasts: the records below can only leave together, or on stop.
    const feedA = startAffinityFeed(a, { learn: (r) => learnedByA.push(r.endpoint) }, { origin: 'a', flush: { windowMs: 600_000 } });
    const feedB = startAffinityFeed(b, { learn: (r) => learnedByB.push(r.endpoint) }, { origin: 'b', flush: 'microtask' });
    // Both feeds' subscriptions reach the server before anything is sent (a's too: b's record must find it).
    await Promise.all([a.nc.flush(), b.nc.flush()]);
    feedA.publish(record('e1'));
    await new Promise((r) => setImmediate(r));
    feedA.publish(record('e2'));
    feedB.publish(record('e3'));
    await waitFor(() => learnedByA.length === 1, { what: "b's record at a" });
    expect(learnedByA).toEqual(['e3']);
    await a.nc.flush();
    expect(learnedByB).toEqual([]);
    feedA.stop();
    await waitFor(() => learnedByB.length === 2, { what: "a's window sent on stop" });
    expect(learnedByB).toEqual(['e1', 'e2']);
    // b's message and a's one message for both of its records.
    await a.nc.flush();
    expect(messages).toBe(2);
    feedA.publish(record('e4'));
    await a.nc.flush();
    expect(messages).toBe(2);
    feedB.stop();
  });

  it('learns what the schema reads from a batch, whichever reader reads it, and rejects what the schema refuses', async () => {
    const learned: AffinityRecord[] = [];
    const feed = startAffinityFeed(b, { learn: (r) => learned.push(r) }, { origin: 'b' });
    await b.nc.flush();
    const bare = { model: 'm', endpoint: 'e1', role: 'prefill' };
    const batches = [
      { v: 1, origin: 'x', records: [bare] },
      // An unknown field: read by the schema, which drops it.
      { v: 1, origin: 'x', records: [{ ...bare, endpoint: 'e2', weight: 3 }] },
      { v: 1, origin: 'x', records: [{ ...bare, endpoint: '' }] },
    ];
    const rejectedBefore = b.rejected.get(Subjects.affinity) ?? 0;
    for (const batch of batches) a.nc.publish(Subjects.affinity, JSON.stringify(batch));
    await a.nc.flush();
    await waitFor(() => (b.rejected.get(Subjects.affinity) ?? 0) > rejectedBefore, { what: 'the refused batch' });
    expect(learned).toEqual(batches.slice(0, 2).map((batch) => AffinityBatchSchema.parse(batch).records[0]));
    expect(learned.map((r) => r.prefixHashes)).toEqual([[], []]);
    feed.stop();
  });

  it('with noEcho, a replica does not even receive its own records back (the server does not deliver them)', async () => {
    const quiet = await connectBus({ servers: nats.url, name: 'replica-quiet', noEcho: true });
    try {
      const got: string[] = [];
      const own = quiet.nc.subscribe(Subjects.affinity, {
        callback: (_e, m) => {
          const d = decodeMessage(AffinityBatchSchema, m.data);
          if (d.ok) got.push(d.value.origin);
        },
      });
      const feed = startAffinityFeed(quiet, { learn: () => undefined }, { origin: 'quiet', flush: 'microtask' });
      const other = startAffinityFeed(b, { learn: () => undefined }, { origin: 'other', flush: 'microtask' });
      await quiet.nc.flush();
      feed.publish(record('q1'));
      await quiet.nc.flush();
      other.publish(record('o1'));
      await waitFor(() => got.includes('other'), { what: "the other replica's record" });
      // Its own message was published (and flushed) before the other's, on the same server: had it been echoed, it
      // would have come first.
      expect(got).toEqual(['other']);
      feed.stop();
      other.stop();
      own.unsubscribe();
    } finally {
      await quiet.close();
    }
  });

  it('sends an open window with the first record queued once it has lasted its time, in the same tick (no timer)', async () => {
    const { learned, sub } = await windowsFrom('a2');
    // The timer that would send a window nobody adds to is far away: only a later record can send this one.
    const feedA = startAffinityFeed(a, { learn: () => undefined }, { origin: 'a2', flush: { windowMs: 5, maxWaitMs: 600_000 } });
    const opened = Date.now();
    feedA.publish(record('w1'));
    await waitFor(() => Date.now() - opened > 5, { what: 'the window to last its time', intervalMs: 1 });
    feedA.publish(record('w2'));
    feedA.publish(record('w3'));
    await waitFor(() => learned.length === 1, { what: 'the window sent with the record that came after its end' });
    expect(learned).toEqual([['w1', 'w2', 'w3']]);
    feedA.stop();
    sub.unsubscribe();
  });
  it('sends a window no later record sends on its timer, also when a timer left from an earlier window comes first', async () => {
    const { learned, sub } = await windowsFrom('a4');
    const feedA = startAffinityFeed(a, { learn: () => undefined }, { origin: 'a4', flush: { windowMs: 5, maxWaitMs: 40 } });
    // Alone: the window leaves on its timer.
    feedA.publish(record('t1'));
    await waitFor(() => learned.length === 1, { what: 'the lone window sent by its timer' });
    // A window sent by a later record leaves its timer armed; the next window, opened after it, still leaves whole.
    const opened = Date.now();
    feedA.publish(record('t2'));
    await waitFor(() => Date.now() - opened > 5, { what: 'the window to last its time', intervalMs: 1 });
    feedA.publish(record('t3'));
    await waitFor(() => learned.length === 2, { what: 'the window sent with the record after its end' });
    feedA.publish(record('t4'));
    feedA.publish(record('t5'));
    await waitFor(() => learned.length === 3, { what: 'the next window sent by the timer' });
    expect(learned).toEqual([['t1'], ['t2', 't3'], ['t4', 't5']]);
    feedA.stop();
    sub.unsubscribe();
  });

  it('with receive, keeps the records that arrive and applies them, in order, only when receive runs its callback', async () => {
    const learned: string[] = [];
    let applyKept: (() => void) | undefined;
    let calls = 0;
    const feedB = startAffinityFeed(
      b,
      { learn: (r) => learned.push(r.endpoint) },
      {
        origin: 'b3',
        receive: (apply) => {
          calls++;
          applyKept = apply;
        },
      },
    );
    const feedA = startAffinityFeed(a, { learn: () => undefined }, { origin: 'a3', flush: 'microtask' });
    await b.nc.flush();
    feedA.publish(record('r1'));
    await a.nc.flush();
    feedA.publish(record('r2'));
    await a.nc.flush();
    // Both messages reached b (a round trip through the server after them), and neither was applied.
    await waitFor(() => applyKept !== undefined, { what: 'the first record kept' });
    await b.nc.flush();
    await a.nc.flush();
    expect(learned).toEqual([]);
    expect(calls).toBe(1);
    applyKept?.();
    expect(learned).toEqual(['r1', 'r2']);
    // The next message asks again.
    feedA.publish(record('r3'));
    await waitFor(() => calls === 2, { what: 'a second call for the next record' });
    applyKept?.();
    expect(learned).toEqual(['r1', 'r2', 'r3']);
    feedA.stop();
    feedB.stop();
  });
});
