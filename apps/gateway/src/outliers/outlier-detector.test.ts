import type { OutlierRecord } from '@triad/bus';
import type { LegInfo } from '@triad/connectors';
import { DEFAULT_OUTLIER_POLICY } from '@triad/crd';
import { ErrorCode } from '@triad/errors';
import { ClientAbortedError, UpstreamError } from '@triad/request';
import { eject, ejectionMs, legVerdict, restore } from './outlier-detector';

const leg: LegInfo = {
  stage: 'prefill',
  endpoint: { key: 'ns.s.p1', pod: 'p1', ip: '10.0.0.1', port: 8000 },
  item: -1,
  attempt: 0,
  startedAt: 0,
};
const where = (endpoint: string, status: number) => ({ stage: 'prefill' as const, endpoint, item: -1, status });

describe('outlier detection rules', () => {
  it("counts the leg's own 5xx, connect failures, resets and timeouts; not 4xx, client aborts or a sibling's failure", () => {
    expect(legVerdict(leg, { ok: true, status: 200 })).toBe('ok');
    const fail = (error: Error) => legVerdict(leg, { ok: false, status: 0, error });
    expect(fail(new UpstreamError(ErrorCode.UpstreamError, 'x', where('ns.s.p1', 503), true))).toBe('5xx');
    expect(fail(new UpstreamError(ErrorCode.UpstreamConnect, 'x', where('ns.s.p1', 0), true))).toBe('connect');
    expect(fail(new UpstreamError(ErrorCode.UpstreamTimeout, 'x', where('ns.s.p1', 0), true))).toBe('timeout');
    expect(fail(new UpstreamError(ErrorCode.UpstreamError, 'x', where('ns.s.p1', 0), true))).toBe('reset');
    // Reset half-way through a 200 answer (the head had arrived): still the engine's failure.
    expect(fail(new UpstreamError(ErrorCode.UpstreamError, 'x', where('ns.s.p1', 200), true))).toBe('reset');
    expect(fail(new UpstreamError(ErrorCode.UpstreamError, 'x', where('ns.s.p1', 400), false))).toBeUndefined();
    expect(fail(new UpstreamError(ErrorCode.UpstreamError, 'x', where('ns.s.other', 500), true))).toBeUndefined();
    expect(fail(new ClientAbortedError())).toBeUndefined();
  });

  it('doubles each ejection in a row up to the maximum, and starts over after a calm stretch', () => {
    const policy = { ...DEFAULT_OUTLIER_POLICY, baseEjectionMs: 1000, maxEjectionMs: 5000 };
    expect([1, 2, 3, 4, 5].map((n) => ejectionMs(policy, n))).toEqual([1000, 2000, 4000, 5000, 5000]);
    const facts = { endpoint: 'ns.s.p1', stage: 'prefill' as const, reason: '5xx' as const, failures: 5, now: 10_000, by: 'gw', policy };
    const first = eject(undefined, facts) as OutlierRecord;
    expect(first).toMatchObject({ state: 'ejected', ejections: 1, ejectedAt: 10_000, ejectedUntil: 11_000 });
    expect(eject(first, { ...facts, now: 10_500 })).toBeUndefined(); // already ejected by someone
    const restored = restore(first, 11_000, 'gw2') as OutlierRecord;
    expect(restored).toMatchObject({ state: 'healthy', ejectedUntil: 0, healthySince: 11_000, ejections: 1, by: 'gw2' });
    // Still ejected: a success as a last resort (or an active probe) ends the ejection early too.
    expect(restore(first, 10_999, 'gw2')).toMatchObject({ state: 'healthy', healthySince: 10_999 });
    expect(restore(restored, 11_500, 'gw2')).toBeUndefined(); // healthy already: nothing to write
    expect(eject(restored, { ...facts, now: 12_000 })).toMatchObject({ ejections: 2, ejectedUntil: 14_000 });
    expect(eject(restored, { ...facts, now: 16_000 })).toMatchObject({ ejections: 1, ejectedUntil: 17_000 });
  });
});
