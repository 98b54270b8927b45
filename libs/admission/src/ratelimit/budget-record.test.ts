import { headroom, settleRecord, ZERO, type BudgetRecord, type SettleRequest, type TokenPair } from './budget-record';

const UNIT = 60_000;
const base = (over: Partial<SettleRequest>): SettleRequest => ({
  replica: 'a',
  now: 10 * UNIT + 5,
  unitMs: UNIT,
  limits: { in: 100, out: 100 },
  maxDebt: { in: 100, out: 100 },
  current: { window: 10, consumed: ZERO, refunded: ZERO },
  debit: ZERO,
  needs: [],
  wantLease: false,
  keepEntry: false,
  lease: { maxFraction: 0.1, ttlMs: 2000, skewMarginMs: 1000 },
  ...over,
});
const need = (i: number, o = 0): TokenPair => ({ in: i, out: o });

describe('settleRecord', () => {
  it('applies refunds reported as totals once: a report sent again changes nothing, a larger total adds the difference', () => {
    let rec = settleRecord(undefined, base({ needs: [need(90)] })).record;
    const report = (refunded: TokenPair, over: Partial<SettleRequest> = {}) =>
      settleRecord(rec, base({ current: { window: 10, consumed: ZERO, refunded }, ...over }));
    rec = report(need(30)).record;
    expect(rec.used.in).toBe(60);
    const again = report(need(30));
    expect(again.write).toBe(false);
    expect(again.record.used.in).toBe(60);
    rec = report(need(50)).record;
    expect(rec.used.in).toBe(40);
    // Another replica's totals are its own.
    rec = report(need(5), { replica: 'b' }).record;
    expect(rec.used.in).toBe(35);
    // After the roll the old window's totals still guard reports about it (they go to the carry).
    const rolled = settleRecord(
      rec,
      base({
        now: 11 * UNIT,
        current: { window: 11, consumed: ZERO, refunded: ZERO },
        previous: { window: 10, consumed: ZERO, refunded: need(50) },
      }),
    );
    expect(rolled.record.carry.in).toBe(35 - 100);
    const late = settleRecord(
      rolled.record,
      base({
        now: 11 * UNIT,
        current: { window: 11, consumed: ZERO, refunded: ZERO },
        previous: { window: 10, consumed: ZERO, refunded: need(60) },
      }),
    );
    expect(late.record.carry.in).toBe(35 - 100 - 10);
  });

  it('admits the needs that fit, in order, and reports the short dimension of the others', () => {
    const o = settleRecord(undefined, base({ needs: [need(30), need(30), need(50), need(40)] }));
    expect(o.blocked).toEqual([undefined, undefined, 'in', undefined]);
    expect(o.record.used).toEqual({ in: 100, out: 0 });
    expect(o.write).toBe(true);
    expect(o.windowEndsAt).toBe(11 * UNIT);
  });

  it('does not write when nothing changes (a refusal with nothing to report)', () => {
    const full = settleRecord(undefined, base({ needs: [need(100)] })).record;
    const o = settleRecord(full, base({ replica: 'b', needs: [need(1)] }));
    expect(o.blocked).toEqual(['in']);
    expect(o.write).toBe(false);
  });

  it('carries an output overrun into the next window as debt, bounded by maxDebt', () => {
    let rec = settleRecord(undefined, base({ needs: [need(0, 10)] })).record;
    rec = settleRecord(rec, base({ debit: { in: 0, out: 170 } })).record; // actual 180 against 10 reserved
    expect(rec.used.out).toBe(180);
    const next = settleRecord(rec, base({ now: 11 * UNIT, current: { window: 11, consumed: ZERO, refunded: ZERO } })).record;
    expect(headroom(next, 'out', { out: 100 }, { in: 0, out: 100 })).toBe(20);
    const capped = settleRecord({ ...rec, used: { in: 0, out: 900 } }, base({ now: 11 * UNIT })).record;
    expect(headroom(capped, 'out', { out: 100 }, { in: 0, out: 100 })).toBe(0);
    const after = settleRecord(capped, base({ now: 12 * UNIT })).record;
    expect(headroom(after, 'out', { out: 100 }, { in: 0, out: 100 })).toBe(100);
  });

  it('starts clean after an idle window (debt up to one unit is absorbed by it)', () => {
    const rec = settleRecord(undefined, base({ debit: { in: 150, out: 0 } })).record;
    const later = settleRecord(rec, base({ now: 13 * UNIT })).record;
    expect(later.window).toBe(13);
    expect(headroom(later, 'in', { in: 100 }, { in: 100, out: 100 })).toBe(100);
  });

  it('grants a bounded lease and stops granting once another replica is starved by leases', () => {
    const a = settleRecord(undefined, base({ needs: [need(10)], wantLease: true }));
    expect(a.grant).toEqual({ in: 10, out: 10 }); // 10% of the limit
    let rec = a.record;
    rec = settleRecord(rec, base({ replica: 'b', needs: [need(70)] })).record;
    const starved = settleRecord(rec, base({ replica: 'b', needs: [need(15)], wantLease: true }));
    expect(starved.blocked).toEqual(['in']);
    expect(starved.holders).toEqual(['a']);
    expect(starved.record.demand).toBe(true);
    expect(starved.grant).toEqual(ZERO);
    // a gives its lease back (spent nothing of it): b's retry fits.
    const returned = settleRecord(starved.record, base({ replica: 'a' })).record;
    expect(returned.leases['a']).toBeUndefined();
    expect(settleRecord(returned, base({ replica: 'b', needs: [need(15)] })).blocked).toEqual([undefined]);
  });

  it('counts what a holder spent from its lease and takes back an expired lease in full', () => {
    let rec = settleRecord(undefined, base({ needs: [need(10)], wantLease: true })).record;
    rec = settleRecord(rec, base({ current: { window: 10, consumed: need(6), refunded: ZERO }, keepEntry: true })).record;
    expect(rec.used.in).toBe(16);
    rec = settleRecord(rec, base({ wantLease: true })).record;
    expect(rec.leases['a']?.in).toBe(10);
    const later = settleRecord(rec, base({ replica: 'b', now: 10 * UNIT + 4000 }));
    expect(later.record.leases['a']).toBeUndefined();
    expect(later.record.used.in).toBe(26);
  });

  it('drops what a replica reports for a lease that was already taken back, but applies refunds', () => {
    let rec = settleRecord(undefined, base({ needs: [need(10)], wantLease: true })).record;
    rec = settleRecord(rec, base({ replica: 'b', now: 10 * UNIT + 4000 })).record; // a's lease (10) charged in full
    const o = settleRecord(rec, base({ now: 10 * UNIT + 4001, current: { window: 10, consumed: need(7), refunded: need(5) } }));
    expect(o.record.used.in).toBe(10 + 10 - 5);
  });

  it('counts open leases as spent at the roll until their holder reports the real figure', () => {
    let rec: BudgetRecord = settleRecord(undefined, base({ needs: [need(90)], wantLease: true })).record;
    rec = settleRecord(rec, base({ replica: 'b', debit: need(10) })).record; // used 100, a holds a lease
    const leaseIn = rec.leases['a']?.in;
    expect(leaseIn).toBeGreaterThan(0);
    const rolled = settleRecord(rec, base({ replica: 'b', now: 11 * UNIT })).record;
    expect(headroom(rolled, 'in', { in: 100 }, { in: 100, out: 100 })).toBe(100 - leaseIn);
    const reported = settleRecord(
      rolled,
      base({
        now: 11 * UNIT,
        current: { window: 11, consumed: ZERO, refunded: ZERO },
        previous: { window: 10, consumed: need(2), refunded: ZERO },
      }),
    ).record;
    expect(reported.prevLeases['a']).toBeUndefined();
    expect(headroom(reported, 'in', { in: 100 }, { in: 100, out: 100 })).toBe(98);
  });

  it('keeps the lease in place on a keep-lease report: refunds count, spending is reported later', () => {
    let rec = settleRecord(undefined, base({ needs: [need(40)], wantLease: true })).record;
    const lease = rec.leases['a'] as { in: number; exp: number };
    const o = settleRecord(
      rec,
      base({ now: 10 * UNIT + 500, keepLease: true, current: { window: 10, consumed: ZERO, refunded: need(15) } }),
    );
    rec = o.record;
    expect(o.grant.in).toBe(lease.in);
    expect(rec.leases['a']).toEqual({ in: lease.in, out: expect.any(Number), exp: 10 * UNIT + 500 + 2000 });
    expect(rec.used.in).toBe(25);
    // Across a roll the open lease is not settled by a keep-lease report: it still counts until fully reported.
    const rolled = settleRecord(
      rec,
      base({ now: 11 * UNIT, keepLease: true, current: { window: 10, consumed: ZERO, refunded: ZERO } }),
    ).record;
    expect(rolled.prevLeases['a']).toBeDefined();
    const reported = settleRecord(rolled, base({ now: 11 * UNIT, current: { window: 10, consumed: need(3), refunded: ZERO } })).record;
    expect(reported.prevLeases['a']).toBeUndefined();
    expect(reported.carry.in).toBe(25 + 3 - 100);
  });

  it('follows a record that a replica with a faster clock already rolled', () => {
    const ahead = settleRecord(undefined, base({ now: 11 * UNIT, needs: [need(40)] })).record;
    const o = settleRecord(ahead, base({ needs: [need(70)] }));
    expect(o.window).toBe(11);
    expect(o.blocked).toEqual(['in']);
  });

  it('restarts a record whose unit changed', () => {
    const rec = settleRecord(undefined, base({ needs: [need(90)] })).record;
    const o = settleRecord(rec, base({ unitMs: 1000, now: 10 * UNIT, needs: [need(90)] }));
    expect(o.blocked).toEqual([undefined]);
    expect(o.record.unitMs).toBe(1000);
  });
});
