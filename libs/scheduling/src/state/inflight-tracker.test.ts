import { readDispatchBatch, type DispatchBatch, type DispatchEvent, type PackedLegCode } from '@triad/bus';
import { InflightTracker } from './inflight-tracker';

const ev = (type: 'start' | 'finish', endpoint: string, requestId = 'r'): DispatchEvent => ({
  type,
  requestId,
  endpoint,
  stage: 'decode',
  at: 0,
});
const batch = (gateway: string, seq: number, events: DispatchEvent[], inflight?: Record<string, number>): DispatchBatch => ({
  v: 1,
  gateway,
  seq,
  events,
  ...(inflight ? { inflight, snapshotIntervalMs: 1000 } : {}),
});

describe('InflightTracker', () => {
  it('counts start/finish events and never goes below zero', () => {
    const t = new InflightTracker();
    t.applyBatch(batch('g1', 0, [ev('start', 'a'), ev('start', 'a'), ev('start', 'b')]), 0);
    t.applyBatch(batch('g1', 1, [ev('finish', 'a'), ev('finish', 'b'), ev('finish', 'b')]), 10);
    expect(t.count('a')).toBe(1);
    expect(t.count('b')).toBe(0);
  });

  it('sums gateways, and a snapshot replaces only its own gateway view (events of that batch included)', () => {
    const t = new InflightTracker();
    t.applyBatch(batch('g1', 0, [ev('start', 'a'), ev('start', 'a')]), 0);
    t.applyBatch(batch('g2', 0, [ev('start', 'a')]), 0);
    expect(t.count('a')).toBe(3);
    t.applyBatch(batch('g1', 1, [ev('start', 'a')], { a: 1, b: 4 }), 100);
    expect(t.snapshot()).toEqual({ a: 2, b: 4 });
  });

  it('forgets a gateway after 3 snapshot intervals without a snapshot', () => {
    const t = new InflightTracker();
    t.applyBatch(batch('g1', 0, [], { a: 2 }), 1000);
    t.applyBatch(batch('g2', 0, [], { a: 1 }), 2500);
    t.applyBatch(batch('g1', 1, [ev('start', 'a')]), 2000); // events alone do not keep a gateway alive
    expect(t.expire(3999)).toEqual([]);
    expect(t.count('a')).toBe(4);
    expect(t.expire(4000)).toEqual(['g1']);
    expect(t.count('a')).toBe(1);
    expect(t.stats).toMatchObject({ gateways: 1, expired: 1 });
  });

  it('counts sequence gaps and resets a gateway whose sequence restarts', () => {
    const t = new InflightTracker();
    t.applyBatch(batch('g1', 5, [ev('start', 'a'), ev('start', 'a')]), 0);
    t.applyBatch(batch('g1', 7, [ev('start', 'a')]), 0);
    expect(t.stats.gaps).toBe(1);
    expect(t.count('a')).toBe(3);
    t.applyBatch(batch('g1', 0, [ev('start', 'b')]), 0);
    expect(t.stats.resets).toBe(1);
    expect(t.snapshot()).toEqual({ b: 1 });
  });

  it('takes events fed directly by a gateway', () => {
    const t = new InflightTracker();
    t.applyEvent('self', ev('start', 'a'));
    t.applyEvent('self', ev('start', 'a'));
    t.applyEvent('self', ev('finish', 'a'));
    expect(t.count('a')).toBe(1);
  });

  it('hands out one live counter per endpoint: a cell taken before any event follows every later change', () => {
    const t = new InflightTracker();
    // The candidate set keeps cells and reads them by reference on the hot path, never asking again.
    const cell = t.cell('a');
    expect(cell.count).toBe(0);
    t.applyEvent('self', ev('start', 'a'));
    t.applyBatch(batch('g2', 0, [ev('start', 'a'), ev('start', 'a')]), 0);
    expect(cell.count).toBe(3);
    // Down to zero (the endpoint leaves the active set) and up again: still the same object.
    t.applyEvent('self', ev('finish', 'a'));
    t.applyBatch(batch('g2', 1, [ev('finish', 'a'), ev('finish', 'a')]), 10);
    expect(cell.count).toBe(0);
    t.applyBatch(batch('g2', 2, [], { a: 5 }), 20);
    expect(cell.count).toBe(5);
    expect(t.cell('a')).toBe(cell);
    expect(t.cell('b')).not.toBe(cell);
  });

  it('never expires the counts a gateway feeds for itself, while silent peers expire next to them', () => {
    const t = new InflightTracker({ missedSnapshots: 3, defaultSnapshotIntervalMs: 1000 });
    t.applyEvent('self', ev('start', 'a'));
    t.applyBatch({ ...batch('peer', 0, []), inflight: { a: 2 }, snapshotIntervalMs: 1000 }, 0);
    expect(t.count('a')).toBe(3);
    expect(t.expire(10_000)).toEqual(['peer']);
    expect(t.count('a')).toBe(1);
    t.applyEvent('self', ev('finish', 'a'));
    expect(t.count('a')).toBe(0);
  });
});

describe('InflightTracker reservations (decode legs not started yet)', () => {
  it('counts a reserved decode pod until its leg starts, then counts the leg once', () => {
    const t = new InflightTracker();
    t.reserve('r1', [{ endpoint: 'ns.ms.d1', ttlMs: 30_000 }], 1000);
    expect(t.count('ns.ms.d1')).toBe(1);
    t.applyEvent('gw', { type: 'start', requestId: 'r1', endpoint: 'ns.ms.d1', stage: 'decode', at: 1500 });
    expect(t.count('ns.ms.d1')).toBe(1);
    t.applyEvent('gw', { type: 'finish', requestId: 'r1', endpoint: 'ns.ms.d1', stage: 'decode', at: 2000, ok: true });
    expect(t.count('ns.ms.d1')).toBe(0);
  });

  it('drops a reservation whose leg never starts after its time to live', () => {
    const t = new InflightTracker();
    t.reserve('r2', [{ endpoint: 'ns.ms.d1', ttlMs: 30_000 }], 1000);
    t.expire(30_999);
    expect(t.count('ns.ms.d1')).toBe(1);
    t.expire(31_000);
    expect(t.count('ns.ms.d1')).toBe(0);
  });

  it('counts every leg of a decision until each starts, with its prompt in the prefill backlog meanwhile', () => {
    const t = new InflightTracker();
    t.reserve(
      'r3',
      [
        { endpoint: 'ns.ms.p1', ttlMs: 2_000, tokens: 2_000 },
        { endpoint: 'ns.ms.d1', ttlMs: 30_000 },
      ],
      1000,
    );
    expect(t.snapshot()).toEqual({ 'ns.ms.p1': 1, 'ns.ms.d1': 1 });
    expect(t.backlog.pendingMs('ns.ms.p1', 1000, 50, 2)).toBe(102);
    t.applyEvent('gw', { type: 'start', requestId: 'r3', endpoint: 'ns.ms.p1', stage: 'prefill', at: 1010, inputTokens: 2_000 });
    // The leg now counts once, through the gateway's own event, with its backlog from the leg's start.
    expect(t.snapshot()).toEqual({ 'ns.ms.p1': 1, 'ns.ms.d1': 1 });
    expect(t.backlog.pendingMs('ns.ms.p1', 1010, 50, 2)).toBe(102);
    t.applyEvent('gw', { type: 'finish', requestId: 'r3', endpoint: 'ns.ms.p1', stage: 'prefill', at: 1100, ok: true });
    expect(t.snapshot()).toEqual({ 'ns.ms.d1': 1 });
  });

  it('ends every reservation of a request whose leg starts on an endpoint the decision did not choose (decided elsewhere)', () => {
    const t = new InflightTracker();
    t.reserve(
      'r5',
      [
        { endpoint: 'ns.ms.p1', ttlMs: 2_000, tokens: 2_000 },
        { endpoint: 'ns.ms.d1', ttlMs: 30_000 },
      ],
      1000,
    );
    // The gateway's budget ran out and its local fallback chose p2 and d2: p1 and d1 will see no leg of r5.
    t.applyEvent('gw', { type: 'start', requestId: 'r5', endpoint: 'ns.ms.p2', stage: 'prefill', at: 1060, inputTokens: 2_000 });
    expect(t.snapshot()).toEqual({ 'ns.ms.p2': 1 });
    expect(t.backlog.pendingMs('ns.ms.p1', 1060, 50, 2)).toBe(0);
    t.applyEvent('gw', { type: 'start', requestId: 'r5', endpoint: 'ns.ms.d2', stage: 'decode', at: 1200 });
    expect(t.snapshot()).toEqual({ 'ns.ms.p2': 1, 'ns.ms.d2': 1 });
  });

  it("replaces a request's reservations when it is decided again (a retry), and lets unstarted legs lapse", () => {
    const t = new InflightTracker();
    t.reserve('r4', [{ endpoint: 'ns.ms.a', ttlMs: 2_000, tokens: 100 }], 1000);
    t.reserve('r4', [{ endpoint: 'ns.ms.b', ttlMs: 2_000, tokens: 100 }], 1100);
    expect(t.snapshot()).toEqual({ 'ns.ms.b': 1 });
    expect(t.backlog.pendingMs('ns.ms.a', 1100, 50, 2)).toBe(0);
    t.expire(3_100);
    expect(t.snapshot()).toEqual({});
    expect(t.backlog.pendingMs('ns.ms.b', 3_100, 50, 2)).toBe(0);
  });
  it("counts one reserved prompt per request and endpoint: a later one replaces it, and the endpoint's first leg to start ends it", () => {
    const t = new InflightTracker();
    // Two prompts for one endpoint: the second replaces the first in the backlog; both legs count.
    t.reserve(
      'r7',
      [
        { endpoint: 'ns.ms.x', ttlMs: 2_000, tokens: 1_000 },
        { endpoint: 'ns.ms.x', ttlMs: 2_000, tokens: 2_000 },
      ],
      1000,
    );
    expect(t.snapshot()).toEqual({ 'ns.ms.x': 2 });
    expect(t.backlog.pendingMs('ns.ms.x', 1000, 50, 2)).toBe(102);
    // The first leg to start there ends the first reservation and the request's prompt there, held by the second.
    t.applyEvent('gw', { type: 'start', requestId: 'r7', endpoint: 'ns.ms.x', stage: 'encode', at: 1010 });
    expect(t.snapshot()).toEqual({ 'ns.ms.x': 2 });
    expect(t.backlog.pendingMs('ns.ms.x', 1010, 50, 2)).toBe(0);
    // A leg without a prompt reserved before one with a prompt on the same endpoint: its start ends the prompt too.
    t.reserve(
      'r8',
      [
        { endpoint: 'ns.ms.y', ttlMs: 2_000 },
        { endpoint: 'ns.ms.y', ttlMs: 3_000, tokens: 2_000 },
        { endpoint: 'ns.ms.z', ttlMs: 2_000, tokens: 2_000 },
      ],
      1000,
    );
    t.applyEvent('gw', { type: 'start', requestId: 'r8', endpoint: 'ns.ms.y', stage: 'encode', at: 1020 });
    expect(t.backlog.pendingMs('ns.ms.y', 1020, 50, 2)).toBe(0);
    expect(t.backlog.pendingMs('ns.ms.z', 1020, 50, 2)).toBe(82);
    // The second reservation on y lapses on its own time; z's prompt leaves with z's reservation.
    t.expire(3_000);
    expect(t.snapshot()).toEqual({ 'ns.ms.x': 1, 'ns.ms.y': 2 });
    expect(t.backlog.pendingMs('ns.ms.z', 1020, 50, 2)).toBe(0);
    t.expire(4_000);
    expect(t.snapshot()).toEqual({ 'ns.ms.x': 1, 'ns.ms.y': 1 });
  });

  it("keeps a gateway's prefill and decode legs in the prefill backlog until they finish, and never an encode leg", () => {
    const t = new InflightTracker();
    const leg = (type: 'start' | 'finish', endpoint: string, stage: 'encode' | 'prefill' | 'decode', at: number): DispatchEvent => ({
      type,
      requestId: 'r6',
      endpoint,
      stage,
      at,
      ...(type === 'start' ? { inputTokens: 2_000 } : { ok: true }),
    });
    // The encoder and the prefill pod are the same endpoint here: only the prefill leg's prompt is backlog there.
    t.applyBatch(batch('g1', 0, [leg('start', 'ns.ms.x', 'encode', 1000), leg('start', 'ns.ms.x', 'prefill', 1000)]), 1000);
    expect(t.backlog.pendingMs('ns.ms.x', 1000, 50, 2)).toBe(102);
    t.applyBatch(batch('g1', 1, [leg('finish', 'ns.ms.x', 'encode', 1010)]), 1010);
    expect(t.backlog.pendingMs('ns.ms.x', 1010, 50, 2)).toBe(92);
    t.applyBatch(batch('g1', 2, [leg('finish', 'ns.ms.x', 'prefill', 1050), leg('start', 'ns.ms.d', 'decode', 1050)]), 1050);
    expect(t.backlog.pendingMs('ns.ms.x', 1050, 50, 2)).toBe(0);
    expect(t.backlog.pendingMs('ns.ms.d', 1050, 50, 2)).toBe(102);
    t.applyBatch(batch('g1', 3, [leg('finish', 'ns.ms.d', 'decode', 1060)]), 1060);
    expect(t.backlog.pendingMs('ns.ms.d', 1060, 50, 2)).toBe(0);
    expect(t.snapshot()).toEqual({});
  });
});

/** `events` as a batch's `packed` legs (the form gateways send), the way the gateway's publisher writes them. */
function packed(gateway: string, seq: number, events: readonly DispatchEvent[], inflight?: Record<string, number>): unknown {
  const at = events[0]?.at ?? 0;
  const requests: string[] = [];
  const endpoints: string[] = [];
  const legs = events.map((e) => {
    if (!requests.includes(e.requestId)) requests.push(e.requestId);
    if (!endpoints.includes(e.endpoint)) endpoints.push(e.endpoint);
    const code = `${e.type[0]}${e.stage[0]}` as PackedLegCode;
    const head = [code, requests.indexOf(e.requestId), endpoints.indexOf(e.endpoint), e.at - at];
    if (e.type === 'start') return e.inputTokens === undefined ? head : [...head, e.inputTokens];
    if (e.ttftMs === undefined) return head;
    return e.tpotMs === undefined ? [...head, e.ttftMs] : [...head, e.ttftMs, e.tpotMs];
  });
  return {
    v: 1,
    gateway,
    seq,
    events: [],
    packed: { at, requests, endpoints, legs },
    ...(inflight ? { inflight, snapshotIntervalMs: 1000 } : {}),
  };
}

describe('InflightTracker fed packed batches', () => {
  it('holds the same counts, prefill backlog, latency and reservations as when the same events come as objects', () => {
    // A fixed pseudo-random run (an LCG): EPD requests of two gateways whose legs interleave across batches, some
    // finishes whose start was never sent, snapshots, reservations, and a gateway that restarts its sequence.
    let state = 7;
    const random = (n: number): number => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return Math.floor((state / 2 ** 31) * n); // the high bits: an LCG's low bits repeat with short periods
    };
    const asObjects = new InflightTracker();
    const asPacked = new InflightTracker();
    const endpoints = ['ns.epd.e-0', 'ns.epd.e-1', 'ns.epd.p-0', 'ns.epd.p-1', 'ns.epd.d-0', 'ns.epd.d-1'];
    const stages = ['encode', 'prefill', 'decode'] as const;
    const seq = { g1: 0, g2: 0 };
    const open = { g1: [] as DispatchEvent[], g2: [] as DispatchEvent[] };
    let now = 1_765_000_000_000;
    let request = 0;
    let backlogSeen = false;
    for (let round = 0; round < 400; round++) {
      now += 1 + random(20);
      const gateway = random(2) === 0 ? 'g1' : 'g2';
      const events: DispatchEvent[] = [];
      for (let n = random(8); n > 0; n--) {
        const at = now - random(10);
        const legs = open[gateway];
        if (legs.length > 0 && random(2) === 0) {
          const start = legs.splice(random(legs.length), 1)[0];
          const latency =
            start.stage === 'encode'
              ? {}
              : { ttftMs: random(5000) / 10, ...(start.stage === 'decode' ? { tpotMs: random(900) / 100 } : {}) };
          events.push({ ...start, type: 'finish', at, ...latency });
        } else if (random(10) === 0) {
          events.push({ type: 'finish', requestId: `orphan-${round}`, endpoint: endpoints[random(6)], stage: 'decode', at, ttftMs: 1 });
        } else {
          const stage = stages[random(3)];
          const id = `req-${random(2) === 0 ? request++ : Math.max(0, request - 1 - random(3))}`;
          const endpoint = endpoints[stages.indexOf(stage) * 2 + random(2)];
          if (random(4) === 0) {
            const legsReserved = [{ endpoint, ttlMs: 50, tokens: 100 + random(900) }];
            asObjects.reserve(id, legsReserved, now);
            asPacked.reserve(id, legsReserved, now);
          }
          const start: DispatchEvent = {
            type: 'start',
            requestId: id,
            endpoint,
            stage,
            at,
            ...(stage === 'encode' ? {} : { inputTokens: random(3000) }),
          };
          legs.push(start);
          events.push(start);
        }
      }
      const snapshot = random(15) === 0 ? Object.fromEntries(endpoints.map((e) => [e, random(3)])) : undefined;
      if (random(100) === 0) seq[gateway] = 0; // a restart: its numbering begins again
      const s = seq[gateway]++;
      if (events.length === 0 && snapshot === undefined) continue;
      asObjects.applyBatch(
        batch(
          gateway,
          s,
          events.map((e) => ({ ...e })),
          snapshot,
        ),
        now,
      );
      const read = readDispatchBatch(JSON.parse(JSON.stringify(packed(gateway, s, events, snapshot))));
      expect(read).toBeDefined();
      asPacked.applyBatch(read!, now);
      expect(asPacked.snapshot()).toEqual(asObjects.snapshot());
      for (const e of endpoints) {
        const pending = asObjects.backlog.pendingMs(e, now, 100, 5);
        backlogSeen ||= pending > 0;
        expect(asPacked.backlog.pendingMs(e, now, 100, 5)).toBe(pending);
        expect(asPacked.latency.get(e)).toEqual(asObjects.latency.get(e));
      }
    }
    expect(Object.keys(asObjects.snapshot()).length).toBeGreaterThan(0);
    expect(backlogSeen).toBe(true);
    expect(asObjects.stats).toEqual(asPacked.stats);
    expect(asObjects.stats.resets).toBeGreaterThan(0);
    expect(endpoints.filter((e) => asObjects.latency.get(e) !== undefined).length).toBeGreaterThan(2);
  });
});
