import { waitFor } from '@triad/testing';
import type { BudgetRecord } from './budget-record';
import { MemoryBudgetStore, StoreUnavailableError, type BudgetStore, type LeaseMessage, type StoredRecord } from './budget-store';
import { LeaseAccount, type LeaseOptions, type ReserveOutcome, type ScopeSettings } from './lease-account';

const UNIT = 3_600_000;
const LEASE: LeaseOptions = { maxFraction: 0.1, ttlMs: 2000, reclaimWaitMs: 200, skewMarginMs: 1000 };
const settings = (inLimit: number, outLimit?: number): ScopeSettings => ({
  unitMs: UNIT,
  limits: { in: inLimit, ...(outLimit !== undefined ? { out: outLimit } : {}) },
  maxDebt: { in: inLimit, out: outLimit ?? 0 },
});

function replicas(n: number, now: () => number, lease = LEASE): { store: MemoryBudgetStore; accounts: LeaseAccount[] } {
  const store = new MemoryBudgetStore();
  const accounts = Array.from({ length: n }, (_, i) => {
    const s = new MemoryBudgetStore(store);
    const acc = new LeaseAccount('model.m', s, `r${i}`, now, lease, settings(200));
    s.subscribe((m) => m.key === acc.key && acc.onMessage(m));
    return acc;
  });
  return { store, accounts };
}

/** A store whose next write lands and then reports a timeout, as a JetStream write whose ack is lost does. */
class AckLostOnce implements BudgetStore {
  readonly backend = 'memory';
  readonly available = true;
  readonly inner = new MemoryBudgetStore();
  loseNextAck = false;
  reads = 0;
  /** Reads made up to the write whose ack was lost: a later read is a report sent again. */
  readsAtLostAck = Infinity;
  read(key: string): Promise<StoredRecord> {
    this.reads++;
    return this.inner.read(key);
  }
  async write(key: string, record: BudgetRecord, revision: number): Promise<boolean> {
    const landed = await this.inner.write(key, record, revision);
    if (landed && this.loseNextAck) {
      this.loseNextAck = false;
      this.readsAtLostAck = this.reads;
      throw new StoreUnavailableError('write timed out (it landed)');
    }
    return landed;
  }
  publish(message: LeaseMessage): void {
    this.inner.publish(message);
  }
  subscribe(handler: (message: LeaseMessage) => void): () => void {
    return this.inner.subscribe(handler);
  }
  sweep(now: number): Promise<number> {
    return this.inner.sweep(now);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

describe('LeaseAccount', () => {
  let t = 10 * UNIT + 1;
  const now = (): number => t;
  beforeEach(() => {
    t = 10 * UNIT + 1;
  });

  it('two replicas sharing a store admit exactly M of N requests, with leases handed back on demand', async () => {
    const { accounts } = replicas(2, now);
    const outcomes: Promise<ReserveOutcome>[] = [];
    for (let wave = 0; wave < 12; wave++) {
      for (let i = 0; i < 5; i++) {
        const acc = accounts[(wave + i) % 2];
        outcomes.push(Promise.resolve(acc.reserve({ in: 10, out: 0 }, settings(200))));
      }
      await new Promise((r) => setImmediate(r));
    }
    const results = await Promise.all(outcomes);
    expect(results.filter((r) => r.ok)).toHaveLength(20);
    expect(results.some((r) => r.ok && r.local)).toBe(true);
    const refused = results.find((r) => !r.ok);
    expect(refused).toMatchObject({ ok: false, kind: 'limited', dim: 'in', retryAt: 11 * UNIT });
  });

  it('reuses refunded tokens once the refund is reported', async () => {
    const { accounts } = replicas(1, now, { ...LEASE, maxFraction: 0 });
    const acc = accounts[0];
    const first = await acc.reserve({ in: 150, out: 0 }, settings(200));
    expect(first.ok).toBe(true);
    expect((await acc.reserve({ in: 100, out: 0 }, settings(200))).ok).toBe(false);
    acc.reconcile((first as { window: number }).window, { in: 150, out: 0 }, { in: 40, out: 0 });
    acc.tick();
    await waitFor(async () => (await acc.reserve({ in: 100, out: 0 }, settings(200))).ok, { what: 'refund to be reported' });
  });

  it('counts a refund once when its report landed but the write timed out and the report is sent again', async () => {
    const store = new AckLostOnce();
    const acc = new LeaseAccount('model.m', store, 'r0', now, { ...LEASE, maxFraction: 0 }, settings(200));
    const first = await acc.reserve({ in: 150, out: 0 }, settings(200));
    expect(first.ok).toBe(true);
    acc.reconcile((first as { window: number }).window, { in: 150, out: 0 }, { in: 40, out: 0 });
    store.loseNextAck = true;
    // tick() does nothing while the reservation's settle is still finishing: ask until the report goes out.
    await waitFor(async () => (acc.tick(), !store.loseNextAck && (await store.inner.read('model.m')).record?.used.in === 40), {
      what: 'the refund report to land (its ack lost)',
    });
    // The account does not know the report landed: it reports again, and the store must not refund twice.
    await waitFor(() => (acc.tick(), store.reads > store.readsAtLostAck), { what: 'the report to be sent again' });
    await acc.close();
    expect((await store.inner.read('model.m')).record?.used.in).toBe(40);
    // 160 left, not 160 + 110.
    expect((await acc.reserve({ in: 161, out: 0 }, settings(200))).ok).toBe(false);
    expect((await acc.reserve({ in: 160, out: 0 }, settings(200))).ok).toBe(true);
  });

  it('charges an output overrun at once and carries it into the next window', async () => {
    const { store, accounts } = replicas(1, now);
    const acc = accounts[0];
    const out = settings(10_000, 100);
    const r = await acc.reserve({ in: 5, out: 10 }, out);
    expect(r.ok).toBe(true);
    acc.reconcile((r as { window: number }).window, { in: 5, out: 10 }, { in: 5, out: 180 });
    await waitFor(async () => (await store.read('model.m')).record?.used.out === 180, { what: 'overrun to be charged' });
    // Only the lease granted before the overrun (10 tokens, already counted as spent) could still be used locally.
    expect((await acc.reserve({ in: 0, out: 11 }, out)).ok).toBe(false);
    t += UNIT; // next window: 100 - 80 of debt = 20 left
    expect((await acc.reserve({ in: 0, out: 20 }, out)).ok).toBe(true);
    expect((await acc.reserve({ in: 0, out: 1 }, out)).ok).toBe(false);
    t += UNIT;
    expect((await acc.reserve({ in: 0, out: 100 }, out)).ok).toBe(true);
  });

  it('spends an overrun the lease still holds from the lease, without a store round trip, and reports it with the lease', async () => {
    const store = new AckLostOnce();
    const limits = settings(10_000, 1_000);
    const acc = new LeaseAccount('model.m', store, 'r0', now, LEASE, limits);
    const r = await acc.reserve({ in: 5, out: 10 }, limits);
    expect(r.ok).toBe(true);
    const reads = store.reads;
    // 295 input tokens more than estimated (an image the estimate did not count): the lease (1,000) holds them.
    acc.reconcile((r as { window: number }).window, { in: 5, out: 10 }, { in: 300, out: 10 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(store.reads).toBe(reads);
    // Spent from the lease: 1,000 - 295 left of it.
    expect(acc.reserve({ in: 706, out: 0 }, limits)).toBeInstanceOf(Promise);
    await acc.close();
    expect((await store.inner.read('model.m')).record?.used).toMatchObject({ in: 1006, out: 10 });
  });

  it('returns an idle lease before it expires so no other replica is starved by it', async () => {
    const { store, accounts } = replicas(2, now, { ...LEASE, reclaimWaitMs: 0 });
    const [a, b] = accounts as [LeaseAccount, LeaseAccount];
    expect((await a.reserve({ in: 10, out: 0 }, settings(200))).ok).toBe(true);
    expect((await store.read('model.m')).record?.leases['r0']?.in).toBe(20);
    t += 3000; // idle past half the lease lifetime
    a.tick();
    await waitFor(async () => (await store.read('model.m')).record?.leases['r0']?.in === 0, { what: 'lease returned' });
    expect((await b.reserve({ in: 190, out: 0 }, settings(200))).ok).toBe(true);
  });

  it('reports the store as unavailable instead of deciding', async () => {
    const acc = replicas(1, now).accounts[0];
    (acc.store as MemoryBudgetStore).available = false;
    const r = await acc.reserve({ in: 10, out: 0 }, settings(200));
    expect(r).toMatchObject({ ok: false, kind: 'unavailable' });
  });
});
