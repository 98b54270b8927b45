import { z } from 'zod';
import { connect } from '@nats-io/transport-node';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { connectBus, type Bus } from './bus';
import type { KvChange } from './typed-kv';
import { Buckets, Subjects, endpointKey, endpointKeyFilter } from '../names';
import { EndpointRecordSchema, type EndpointRecord } from '../records';
import { ScheduleBatchReplySchema, ScheduleBatchSchema } from '../scheduling';

function endpoint(pod: string, running = 0): EndpointRecord {
  return {
    schemaVersion: 1,
    namespace: 'default',
    modelServer: 'ms',
    pod,
    role: 'decode',
    group: 'g1',
    ip: '127.0.0.1',
    port: 8000,
    engine: 'vLLM',
    ready: true,
    models: ['m'],
    updatedAt: Date.now(),
    metrics: { running, waiting: 0, kvCacheUsage: 0.1, scrapedAt: Date.now(), stale: false },
  };
}

describe('Bus against a real nats-server', () => {
  let server: NatsServerHandle;
  let a: Bus;
  let b: Bus;
  beforeAll(async () => {
    server = await startNatsServer();
    a = await connectBus({ servers: server.url, name: 'test-a' });
    b = await connectBus({ servers: server.url, name: 'test-b' });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await server?.close();
  });

  it('puts endpoint records and a watcher sees the current values, then changes and deletions', async () => {
    const kvA = await a.kv(Buckets.endpoints, EndpointRecordSchema);
    await kvA.put(endpointKey('default', 'ms', 'p0'), endpoint('p0'));
    await kvA.put(endpointKey('default', 'other', 'x'), { ...endpoint('x'), modelServer: 'other' });
    const kvB = await b.kv(Buckets.endpoints, EndpointRecordSchema);
    const seen: KvChange<EndpointRecord>[] = [];
    const watch = await kvB.watch({ key: endpointKeyFilter('default', 'ms'), onChange: (c) => seen.push(c) });
    await watch.synced;
    expect(seen.map((c) => [c.op, c.key])).toEqual([['PUT', 'default.ms.p0']]);
    await kvA.put(endpointKey('default', 'ms', 'p1'), endpoint('p1', 3));
    await kvA.delete(endpointKey('default', 'ms', 'p0'));
    await waitFor(() => seen.length === 3, { what: 'put and delete' });
    expect(seen.slice(1).map((c) => [c.op, c.key, c.op === 'PUT' ? c.value.metrics.running : undefined])).toEqual([
      ['PUT', 'default.ms.p1', 3],
      ['DEL', 'default.ms.p0', undefined],
    ]);
    expect(await kvB.get(endpointKey('default', 'ms', 'p1'))).toMatchObject({ pod: 'p1' });
    expect((await kvB.keys('default.>')).sort()).toEqual(['default.ms.p1', 'default.other.x']);
    watch.stop();
  });

  it('signals sync at once for a filter that matches nothing', async () => {
    const kv = await b.kv(Buckets.endpoints, EndpointRecordSchema);
    const watch = await kv.watch({ key: endpointKeyFilter('nowhere', 'none'), onChange: () => undefined });
    await expect(watch.synced).resolves.toBeUndefined();
    watch.stop();
  });

  it('counts and skips invalid KV values instead of passing them on', async () => {
    const raw = await a.kv('triad_test_raw', z.object({ n: z.number() }));
    const strict = await b.kv('triad_test_raw', z.object({ n: z.number().max(5) }));
    const seen: number[] = [];
    const watch = await strict.watch({ onChange: (c) => c.op === 'PUT' && seen.push(c.value.n) });
    await raw.put('k1', { n: 9 });
    await raw.put('k2', { n: 2 });
    await waitFor(() => seen.length === 1);
    expect(seen).toEqual([2]);
    expect(b.rejected.get('triad_test_raw:k1')).toBe(1);
    expect(await strict.get('k1')).toBeUndefined();
    watch.stop();
  });

  it('compare-and-set rejects a stale revision', async () => {
    const kv = await a.kv('triad_test_cas', z.object({ n: z.number() }));
    const rev = await kv.create('budget', { n: 10 });
    await expect(kv.create('budget', { n: 1 })).rejects.toThrow();
    const rev2 = await kv.update('budget', { n: 9 }, rev);
    await expect(kv.update('budget', { n: 8 }, rev)).rejects.toThrow();
    expect(await kv.getEntry('budget')).toEqual({ value: { n: 9 }, revision: rev2 });
  });

  it('serves request-reply in a queue group: each request answered once, spread over replicas', async () => {
    const served: string[] = [];
    const opts = {
      queue: 'schedulers',
      onInvalid: (error: string) => ({ v: 1 as const, error: { code: 'BUS_MESSAGE_INVALID', message: error } }),
      onError: () => ({ v: 1 as const, error: { code: 'INTERNAL', message: 'x' } }),
    };
    const handler = (who: string) => (batch: z.output<typeof ScheduleBatchSchema>) => {
      served.push(who);
      return {
        v: 1 as const,
        decisions: batch.requests.map((r) => ({ id: r.id, ok: false as const, code: 'SCHED_NO_CANDIDATES', message: who })),
      };
    };
    const s1 = a.serve(Subjects.schedule, ScheduleBatchSchema, ScheduleBatchReplySchema, handler('a'), opts);
    const s2 = b.serve(Subjects.schedule, ScheduleBatchSchema, ScheduleBatchReplySchema, handler('b'), opts);
    await a.nc.flush();
    await b.nc.flush();
    const client = await connectBus({ servers: server.url, name: 'client' });
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        client.request(
          Subjects.schedule,
          ScheduleBatchSchema,
          { v: 1, requests: [{ id: `r${i}`, namespace: 'default', modelServer: 'ms', model: 'm' }] },
          ScheduleBatchReplySchema,
          { timeoutMs: 2000 },
        ),
      ),
    );
    expect(served).toHaveLength(40);
    expect(new Set(served)).toEqual(new Set(['a', 'b']));
    replies.forEach((r, i) => expect('decisions' in r && r.decisions[0]?.id).toBe(`r${i}`));
    s1.unsubscribe();
    s2.unsubscribe();
    await client.close();
  });

  it("hands a served request's headers to the handler that reads them, as often as it reads them", async () => {
    const seen: (string | undefined)[] = [];
    const sub = a.serve(
      Subjects.schedule,
      ScheduleBatchSchema,
      ScheduleBatchReplySchema,
      (_batch, ctx) => {
        seen.push(ctx.headers?.['traceparent'], ctx.headers?.['traceparent'], ctx.subject);
        return { v: 1 as const, decisions: [] };
      },
      {
        onInvalid: (error) => ({ v: 1 as const, error: { code: 'BUS_MESSAGE_INVALID', message: error } }),
        onError: () => ({ v: 1 as const, error: { code: 'INTERNAL', message: 'x' } }),
      },
    );
    await a.nc.flush();
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const batch = { v: 1 as const, requests: [{ id: 'r', namespace: 'n', modelServer: 's', model: 'm' }] };
    try {
      await b.request(Subjects.schedule, ScheduleBatchSchema, batch, ScheduleBatchReplySchema, {
        timeoutMs: 2000,
        headers: { traceparent },
      });
      await b.request(Subjects.schedule, ScheduleBatchSchema, batch, ScheduleBatchReplySchema, { timeoutMs: 2000 });
      expect(seen).toEqual([traceparent, traceparent, Subjects.schedule, undefined, undefined, Subjects.schedule]);
    } finally {
      sub.unsubscribe();
    }
  });

  it('answers a malformed request with a typed error reply, not a timeout', async () => {
    const sub = a.serve(Subjects.schedule, ScheduleBatchSchema, ScheduleBatchReplySchema, () => ({ v: 1 as const, decisions: [] }), {
      onInvalid: (error) => ({ v: 1 as const, error: { code: 'BUS_MESSAGE_INVALID', message: error } }),
      onError: () => ({ v: 1 as const, error: { code: 'INTERNAL', message: 'x' } }),
    });
    await a.nc.flush();
    const nc = await connect({ servers: server.url });
    const reply = await nc.request(Subjects.schedule, JSON.stringify({ v: 1, requests: 'nope' }), { timeout: 2000 });
    expect(reply.json()).toEqual({ v: 1, error: { code: 'BUS_MESSAGE_INVALID', message: expect.stringContaining('requests') } });
    expect(a.rejected.get(Subjects.schedule)).toBeGreaterThanOrEqual(1);
    sub.unsubscribe();
    await nc.close();
  });

  it("sends the text of the serve's reply writer, for the handler's replies and the invalid requests' alike", async () => {
    const written: unknown[] = [];
    const sub = a.serve(
      Subjects.schedule,
      ScheduleBatchSchema,
      ScheduleBatchReplySchema,
      (batch) => ({ v: 1 as const, decisions: batch.requests.map((r) => ({ id: r.id, ok: false as const, code: 'X', message: 'm' })) }),
      {
        onInvalid: (error) => ({ v: 1 as const, error: { code: 'BUS_MESSAGE_INVALID', message: error } }),
        onError: () => ({ v: 1 as const, error: { code: 'INTERNAL', message: 'x' } }),
        write: (reply) => {
          written.push(reply);
          return `{"written":${written.length}}`;
        },
      },
    );
    await a.nc.flush();
    const nc = await connect({ servers: server.url });
    try {
      const batch = { v: 1, requests: [{ id: 'r', namespace: 'n', modelServer: 's', model: 'm' }] };
      expect((await nc.request(Subjects.schedule, JSON.stringify(batch), { timeout: 2000 })).string()).toBe('{"written":1}');
      expect((await nc.request(Subjects.schedule, '{"v":1}', { timeout: 2000 })).string()).toBe('{"written":2}');
      expect(written).toEqual([
        { v: 1, decisions: [{ id: 'r', ok: false, code: 'X', message: 'm' }] },
        { v: 1, error: { code: 'BUS_MESSAGE_INVALID', message: expect.stringContaining('requests') } },
      ]);
    } finally {
      sub.unsubscribe();
      await nc.close();
    }
  });

  it('writes a reply before its after-reply tasks and the messages that followed its request, and delivers every message before the next request', async () => {
    const seen: string[] = [];
    // What the serving connection still has to write when a followed message is delivered (nats.js's outbound buffer).
    const unwritten = (): number => (a.nc as unknown as { protocol: { outbound: { size(): number } } }).protocol.outbound.size();
    const unwrittenAtEvent: number[] = [];
    const unwrittenAfterReply: number[] = [];
    const events = a.subscribe('triad.test.after', z.object({ n: z.number() }), (v) => {
      unwrittenAtEvent.push(unwritten());
      seen.push(`event ${v.n}`);
    });
    const served = a.serve(
      Subjects.schedule,
      ScheduleBatchSchema,
      ScheduleBatchReplySchema,
      (batch, ctx) => {
        const id = batch.requests[0]?.id;
        seen.push(`request ${id}`);
        ctx.afterReply(() => {
          unwrittenAfterReply.push(unwritten());
          seen.push(`after reply ${id}`);
        });
        return {
          v: 1 as const,
          decisions: batch.requests.map((r) => ({ id: r.id, ok: false as const, code: 'SCHED_NO_CANDIDATES', message: 'x' })),
        };
      },
      {
        onInvalid: (error) => ({ v: 1 as const, error: { code: 'BUS_MESSAGE_INVALID', message: error } }),
        onError: () => ({ v: 1 as const, error: { code: 'INTERNAL', message: 'x' } }),
      },
    );
    await a.nc.flush();
    const nc = await connect({ servers: server.url });
    const inbox = `_INBOX.after.${Date.now()}`;
    const replies: string[] = [];
    nc.subscribe(`${inbox}.*`, {
      callback: (_e, m) => {
        replies.push(m.subject.slice(inbox.length + 1));
      },
    });
    await nc.flush();
    // One write from the client: request 1, event 1, request 2, event 2, as a gateway sends a batch with its events.
    const request = (id: string) => JSON.stringify({ v: 1, requests: [{ id, namespace: 'default', modelServer: 'ms', model: 'm' }] });
    nc.publish(Subjects.schedule, request('r1'), { reply: `${inbox}.r1` });
    nc.publish('triad.test.after', JSON.stringify({ n: 1 }));
    nc.publish(Subjects.schedule, request('r2'), { reply: `${inbox}.r2` });
    nc.publish('triad.test.after', JSON.stringify({ n: 2 }));
    await waitFor(() => seen.length === 6 && replies.length === 2, { what: 'two requests answered, their after-reply tasks, two events' });
    expect(seen).toEqual(['request r1', 'after reply r1', 'event 1', 'request r2', 'after reply r2', 'event 2']);
    // Event 1 is delivered before request 2 (it arrived first), when reply 1 may still wait for the turn's write;
    // event 2 followed the last request and waits until both replies are written.
    expect(unwrittenAtEvent[1]).toBe(0);
    expect(unwrittenAfterReply[1]).toBe(0);
    expect(replies.sort()).toEqual(['r1', 'r2']);
    events.unsubscribe();
    served.unsubscribe();
    await nc.close();
  });

  it('carries headers (W3C trace context) and drops invalid published messages', async () => {
    const got: { n: number; tp?: string; subject: string }[] = [];
    // A wildcard: the context's subject is the message's own.
    const sub = b.subscribe('triad.test.*', z.object({ n: z.number() }), (v, ctx) =>
      got.push({ n: v.n, tp: ctx.headers?.['traceparent'], subject: ctx.subject }),
    );
    await b.nc.flush();
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    a.publish('triad.test.events', z.object({ n: z.number() }), { n: 1 }, { traceparent: tp });
    a.nc.publish('triad.test.events', '{"n":"one"}');
    a.publish('triad.test.events', z.object({ n: z.number() }), { n: 2 });
    await waitFor(() => got.length === 2);
    expect(got).toEqual([
      { n: 1, tp, subject: 'triad.test.events' },
      { n: 2, tp: undefined, subject: 'triad.test.events' },
    ]);
    expect(b.rejected.get('triad.test.*')).toBe(1);
    sub.unsubscribe();
  });

  it('reports a request with no responders as BUS_UNAVAILABLE', async () => {
    await expect(a.request('triad.test.nobody', z.object({}), {}, z.object({}), { timeoutMs: 500 })).rejects.toMatchObject({
      code: 'BUS_UNAVAILABLE',
    });
  });
});
