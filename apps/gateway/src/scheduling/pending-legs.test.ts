import type { DispatchEvent } from '@triad/bus';
import { InflightTracker } from '@triad/scheduling';
import { PendingLegs } from './pending-legs';

const start = (requestId: string, endpoint: string, stage: DispatchEvent['stage'], at: number, inputTokens?: number): DispatchEvent => ({
  type: 'start',
  requestId,
  endpoint,
  stage,
  at,
  ...(inputTokens !== undefined ? { inputTokens } : {}),
});
const finish = (requestId: string, endpoint: string, stage: DispatchEvent['stage'], at: number, ttftMs?: number): DispatchEvent => ({
  type: 'finish',
  requestId,
  endpoint,
  stage,
  at,
  ok: true,
  ...(ttftMs !== undefined ? { ttftMs } : {}),
});

describe('PendingLegs', () => {
  it('leaves the tracker with the counts, prefill backlog and latency that applying every event as it comes gives', () => {
    const events: DispatchEvent[] = [
      // r1: a whole EPD request (done), r2: encoded and prefilling, r3: two encoders, one done; r4: a retry, open.
      start('r1', 'e1', 'encode', 1),
      start('r2', 'e1', 'encode', 2),
      finish('r1', 'e1', 'encode', 3, 1.5),
      start('r1', 'p1', 'prefill', 4, 900),
      start('r3', 'e1', 'encode', 5),
      start('r3', 'e2', 'encode', 5),
      finish('r2', 'e1', 'encode', 6, 2),
      start('r2', 'p1', 'prefill', 7, 1200),
      finish('r1', 'p1', 'prefill', 8, 3),
      start('r1', 'd1', 'decode', 9),
      finish('r3', 'e2', 'encode', 10, 4),
      start('r4', 'd1', 'decode', 11),
      finish('r4', 'd1', 'decode', 12, 5),
      start('r4', 'd2', 'decode', 13),
      finish('r1', 'd1', 'decode', 14, 6),
    ];
    // r5's first leg was applied as it came, before the holding began; it finishes while r5's second leg is held.
    const before = [start('r5', 'p2', 'prefill', 0, 500)];
    const during = [...events, start('r5', 'd1', 'decode', 15), finish('r5', 'p2', 'prefill', 16, 7)];
    const eager = new InflightTracker();
    for (const e of [...before, ...during]) eager.applyEvent('gw', e);

    const lazy = new InflightTracker();
    for (const e of before) lazy.applyEvent('gw', e);
    const pending = new PendingLegs();
    for (const e of during) {
      if (!pending.add(e)) lazy.applyEvent('gw', e);
      else lazy.observeLatency(e);
    }
    expect(pending.size).toBe(4);
    pending.drain((e) => lazy.applyEvent('gw', e));

    expect(lazy.snapshot()).toEqual(eager.snapshot());
    expect(lazy.snapshot()).toEqual({ e1: 1, p1: 1, d1: 1, d2: 1 });
    for (const endpoint of ['e1', 'e2', 'p1', 'p2', 'd1', 'd2']) {
      expect(lazy.backlog.pendingMs(endpoint, 20, 50, 2)).toBe(eager.backlog.pendingMs(endpoint, 20, 50, 2));
      expect(lazy.latency.get(endpoint)).toEqual(eager.latency.get(endpoint));
    }
    expect(pending.size).toBe(0);
  });

  it('does not change the events it holds (they are also published)', () => {
    const pending = new PendingLegs();
    const held = finish('r1', 'e1', 'encode', 2, 1.5);
    pending.add(start('r1', 'e1', 'encode', 1));
    pending.add(start('r1', 'e2', 'encode', 1));
    pending.add(held);
    expect(held.ttftMs).toBe(1.5);
    const drained: DispatchEvent[] = [];
    pending.drain((e) => drained.push(e));
    expect(drained.map((e) => [e.type, e.endpoint, e.ttftMs])).toEqual([
      ['start', 'e1', undefined],
      ['start', 'e2', undefined],
      ['finish', 'e1', undefined],
    ]);
  });
});
