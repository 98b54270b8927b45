import { DIMS, ZERO, settleRecord, type Dim, type Limits, type SettleOutcome, type TokenPair, type WindowUsage } from './budget-record';
import { transact, type BudgetStore, type LeaseMessage } from './budget-store';

export interface LeaseOptions {
  readonly maxFraction: number;
  readonly ttlMs: number;
  readonly reclaimWaitMs: number;
  readonly skewMarginMs: number;
}

/** The limit a scope has right now (it can change between requests when a ModelRoute or tier changes). */
export interface ScopeSettings {
  readonly unitMs: number;
  readonly limits: Limits;
  readonly maxDebt: TokenPair;
}

export type ReserveOutcome =
  | { readonly ok: true; readonly window: number; readonly local: boolean }
  | { readonly ok: false; readonly kind: 'limited'; readonly dim: Dim; readonly retryAt: number }
  | { readonly ok: false; readonly kind: 'unavailable'; readonly error: Error };

interface Waiter {
  readonly cost: TokenPair;
  readonly resolve: (outcome: ReserveOutcome) => void;
}

type MPair = { in: number; out: number };
interface LocalUsage {
  window: number;
  consumed: MPair;
  /** Refunds of this window in total; the store is told totals, so a report sent again applies nothing twice. */
  refunded: MPair;
  /** The refund total the store has acknowledged. */
  reported: MPair;
}

const zero = (): MPair => ({ in: 0, out: 0 });
const nonZero = (p: TokenPair): boolean => p.in !== 0 || p.out !== 0;
const newUsage = (window: number): LocalUsage => ({ window, consumed: zero(), refunded: zero(), reported: zero() });
const pendingRefund = (u: LocalUsage): boolean => u.refunded.in > u.reported.in || u.refunded.out > u.reported.out;
const copyUsage = (u: LocalUsage): WindowUsage => ({ window: u.window, consumed: { ...u.consumed }, refunded: { ...u.refunded } });

/**
 * One replica's view of one scope: its lease (budget it may spend without asking), what it spent and gave back
 * since it last settled, and the reservations waiting for the store. Reservations that fit the lease are
 * decided synchronously; the rest wait for one settle (compare-and-set) shared by all of them. While a settle
 * is in flight nothing is spent locally, so what the store is told always matches what was spent.
 */
export class LeaseAccount {
  readonly key: string;
  readonly #store: BudgetStore;
  readonly #replica: string;
  readonly #now: () => number;
  readonly #lease: LeaseOptions;
  #settings: ScopeSettings;
  #cur: LocalUsage;
  #prev: LocalUsage | undefined;
  #debit = zero();
  #grant: TokenPair = ZERO;
  #grantWindow = Number.NaN;
  #grantDeadline = 0;
  #waiters: Waiter[] = [];
  #settling: Promise<void> | undefined;
  /** A settle that replaces the lease is in flight: nothing may be spent locally until it lands. */
  #blocking = false;
  #returnRequested = false;
  #flushWanted = false;
  #outstanding = 0;
  #lastUse = 0;
  #reclaimWait: { window: number; pending: Set<string>; done: () => void } | undefined;

  constructor(key: string, store: BudgetStore, replica: string, now: () => number, lease: LeaseOptions, settings: ScopeSettings) {
    this.key = key;
    this.#store = store;
    this.#replica = replica;
    this.#now = now;
    this.#lease = lease;
    this.#settings = settings;
    this.#cur = newUsage(Math.floor(now() / settings.unitMs));
  }

  get store(): BudgetStore {
    return this.#store;
  }

  /** Reserves `cost`; synchronous when the lease covers it, else after a settle with the store. */
  reserve(cost: TokenPair, settings: ScopeSettings): ReserveOutcome | Promise<ReserveOutcome> {
    this.#applySettings(settings);
    const now = this.#now();
    this.#lastUse = now;
    // During a refund/renewal write the lease stays valid and can be spent, as long as the window holds.
    if (!this.#blocking && this.#waiters.length === 0) {
      if (!this.#settling) this.#advance(now);
      if (this.#fitsLease(cost, now) && Math.floor(now / this.#settings.unitMs) === this.#cur.window) return this.#spendLease(cost);
    }
    return new Promise((resolve) => {
      this.#waiters.push({ cost, resolve });
      this.#kick();
    });
  }

  /**
   * Settles a reservation made in `window` against what was really used. Unused tokens are given back to that
   * window; tokens beyond the reservation are charged to the current window at once: spent from the lease when
   * it still holds them (as if they had been reserved up front; reported with the lease's other spending), else
   * reported to the store right away (the overrun a later window inherits as debt when this one cannot absorb it).
   */
  reconcile(window: number, reserved: TokenPair, actual: TokenPair): void {
    this.#outstanding = Math.max(0, this.#outstanding - 1);
    const now = this.#now();
    if (!this.#settling) this.#advance(now);
    const usage = window === this.#cur.window ? this.#cur : window === this.#prev?.window ? this.#prev : undefined;
    const over = { in: 0, out: 0 };
    for (const dim of DIMS) {
      const delta = actual[dim] - reserved[dim];
      if (delta > 0) over[dim] = delta;
      else if (delta < 0 && usage) usage.refunded[dim] -= delta;
    }
    if (!nonZero(over)) return;
    // An estimate that fell short (input tokens of media, say) is the common case: taking it from the lease saves a
    // store round trip per request, and the store already counts the lease as this replica's.
    if (usage === this.#cur && !this.#blocking && this.#waiters.length === 0 && this.#fitsLease(over, now)) {
      this.#cur.consumed.in += over.in;
      this.#cur.consumed.out += over.out;
      return;
    }
    this.#debit.in += over.in;
    this.#debit.out += over.out;
    this.#flushWanted = true;
    this.#kick();
  }

  /** Lease traffic from other replicas, routed here by key. */
  onMessage(message: LeaseMessage): void {
    if (message.from === this.#replica) return;
    if (message.t === 'released') {
      const wait = this.#reclaimWait;
      if (wait && wait.window === message.window && wait.pending.delete(message.from) && wait.pending.size === 0) wait.done();
      return;
    }
    if (nonZero(this.#grant) && this.#grantWindow === message.window) {
      this.#returnRequested = true;
      this.#kick();
    } else {
      this.#store.publish({ t: 'released', key: this.key, window: message.window, from: this.#replica });
    }
  }

  /** Periodic upkeep: renew a lease in use before it expires, return an idle one, report refunds. */
  tick(): void {
    if (this.#settling) return;
    const now = this.#now();
    this.#advance(now);
    const live = nonZero(this.#grant) && this.#grantWindow === this.#cur.window;
    if (live && now >= this.#grantDeadline - this.#lease.ttlMs / 2) {
      if (now - this.#lastUse < this.#lease.ttlMs) this.#flushWanted = true;
      else this.#returnRequested = true;
    } else if (this.#prev || pendingRefund(this.#cur) || nonZero(this.#debit) || (!live && nonZero(this.#cur.consumed))) {
      this.#flushWanted = true;
    }
    this.#kick();
  }

  /** True when the account holds nothing and can be dropped. */
  idle(): boolean {
    return (
      !this.#settling &&
      this.#waiters.length === 0 &&
      this.#outstanding === 0 &&
      !nonZero(this.#grant) &&
      !this.#prev &&
      !nonZero(this.#debit) &&
      !nonZero(this.#cur.consumed) &&
      !pendingRefund(this.#cur) &&
      this.#now() - this.#lastUse > 2 * this.#lease.ttlMs
    );
  }

  /** Gives the lease back and reports everything pending; resolves when done (or the store failed). */
  async close(): Promise<void> {
    if (nonZero(this.#grant) || this.#prev || nonZero(this.#debit) || pendingRefund(this.#cur) || nonZero(this.#cur.consumed)) {
      this.#returnRequested = true;
      this.#kick();
    }
    await this.#settling;
  }

  #applySettings(settings: ScopeSettings): void {
    if (settings.unitMs !== this.#settings.unitMs) {
      // Window ids of another unit are not comparable: start over (the store record is reset the same way).
      this.#cur = newUsage(Math.floor(this.#now() / settings.unitMs));
      this.#prev = undefined;
      this.#grant = ZERO;
    }
    this.#settings = settings;
  }

  /** Moves to the clock's window; the old window's usage is kept to report (it settles the old lease). */
  #advance(now: number): void {
    const window = Math.floor(now / this.#settings.unitMs);
    if (window <= this.#cur.window) return;
    const old = this.#cur;
    const hadLease = this.#grantWindow === old.window;
    this.#prev = window === old.window + 1 && (hadLease || nonZero(old.consumed) || pendingRefund(old)) ? old : undefined;
    this.#cur = newUsage(window);
    this.#grant = ZERO;
  }

  #fitsLease(cost: TokenPair, now: number): boolean {
    if (this.#grantWindow !== this.#cur.window || now >= this.#grantDeadline) return false;
    const { limits } = this.#settings;
    return DIMS.every((d) => limits[d] === undefined || cost[d] <= this.#grant[d] - this.#cur.consumed[d]);
  }

  #spendLease(cost: TokenPair): ReserveOutcome {
    for (const dim of DIMS) this.#cur.consumed[dim] += cost[dim];
    this.#outstanding++;
    return { ok: true, window: this.#cur.window, local: true };
  }

  #kick(): void {
    if (this.#settling) return;
    if (this.#waiters.length === 0 && !this.#returnRequested && !this.#flushWanted) return;
    this.#settling = this.#run().finally(() => {
      this.#settling = undefined;
      // Work that arrived during the last store round-trip starts the next one.
      if (this.#waiters.length > 0 || this.#returnRequested || this.#flushWanted) this.#kick();
    });
  }

  async #run(): Promise<void> {
    let waited = false;
    for (;;) {
      const now = this.#now();
      this.#advance(now);
      this.#waiters = this.#waiters.filter((w) => (this.#fitsLease(w.cost, now) ? (w.resolve(this.#spendLease(w.cost)), false) : true));
      const batch = this.#waiters.splice(0);
      const returning = this.#returnRequested;
      if (batch.length === 0 && !returning && !this.#flushWanted) return;
      this.#returnRequested = false;
      this.#flushWanted = false;
      // Refunds, overruns and renewals keep the lease in place (light); needs and returns replace it (blocking).
      const light =
        batch.length === 0 &&
        !returning &&
        nonZero(this.#grant) &&
        this.#grantWindow === this.#cur.window &&
        now - this.#lastUse < this.#lease.ttlMs;
      this.#blocking = !light;
      let outcome: SettleOutcome;
      try {
        outcome = await this.#settle(
          batch.map((w) => w.cost),
          !returning && (batch.length > 0 || now - this.#lastUse < this.#lease.ttlMs),
          now,
          light,
        );
      } catch (err) {
        for (const w of batch) w.resolve({ ok: false, kind: 'unavailable', error: err as Error });
        return;
      } finally {
        this.#blocking = false;
      }
      if (returning) this.#store.publish({ t: 'released', key: this.key, window: outcome.window, from: this.#replica });
      const blocked = batch.filter((w, i) => {
        if (outcome.blocked[i] !== undefined) return true;
        this.#outstanding++;
        w.resolve({ ok: true, window: outcome.window, local: false });
        return false;
      });
      if (blocked.length === 0) continue;
      if (outcome.holders.length > 0 && !waited) {
        // Budget sits in other replicas' leases: ask for it back, then try once more before refusing.
        waited = true;
        await this.#awaitReturns(outcome.holders, outcome.window);
        this.#waiters.unshift(...blocked);
        continue;
      }
      for (const w of blocked) {
        const i = batch.indexOf(w);
        w.resolve({ ok: false, kind: 'limited', dim: outcome.blocked[i] as Dim, retryAt: outcome.windowEndsAt });
      }
    }
  }

  async #settle(needs: TokenPair[], wantLease: boolean, startedAt: number, keepLease: boolean): Promise<SettleOutcome> {
    // With the lease kept, what was spent from it is still being spent: it is reported by the next settle that
    // replaces the lease.
    const cur = keepLease ? { ...copyUsage(this.#cur), consumed: ZERO } : copyUsage(this.#cur);
    const prev = this.#prev ? copyUsage(this.#prev) : undefined;
    const debit = { ...this.#debit };
    const outcome = await transact(this.#store, this.key, (record) => {
      const o = settleRecord(record, {
        replica: this.#replica,
        now: this.#now(),
        unitMs: this.#settings.unitMs,
        limits: this.#settings.limits,
        maxDebt: this.#settings.maxDebt,
        current: cur,
        ...(prev ? { previous: prev } : {}),
        debit,
        needs,
        wantLease,
        keepEntry: this.#outstanding > 0 || needs.length > 0,
        keepLease,
        lease: this.#lease,
      });
      return { record: o.record, write: o.write, result: o };
    });
    // Only what was reported is settled: spending and refunds that arrived during the round-trip go with the next one.
    for (const dim of DIMS) {
      this.#cur.consumed[dim] -= cur.consumed[dim];
      this.#debit[dim] -= debit[dim];
    }
    for (const sent of prev ? [cur, prev] : [cur]) {
      const local = [this.#cur, this.#prev].find((u) => u?.window === sent.window);
      if (!local) continue;
      for (const dim of DIMS) local.reported[dim] = Math.max(local.reported[dim], sent.refunded[dim]);
    }
    if (prev && this.#prev && !pendingRefund(this.#prev)) this.#prev = undefined;
    if (outcome.window > this.#cur.window) {
      // Another replica's clock is ahead and rolled the record: follow the record's window.
      const old = this.#cur;
      this.#prev = outcome.window === old.window + 1 && (pendingRefund(old) || nonZero(old.consumed)) ? old : undefined;
      this.#cur = newUsage(outcome.window);
    }
    this.#grant = outcome.grant;
    this.#grantWindow = outcome.window;
    this.#grantDeadline = startedAt + this.#lease.ttlMs;
    return outcome;
  }

  #awaitReturns(holders: readonly string[], window: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(), this.#lease.reclaimWaitMs);
      timer.unref?.();
      const done = (): void => {
        clearTimeout(timer);
        this.#reclaimWait = undefined;
        resolve();
      };
      this.#reclaimWait = { window, pending: new Set(holders), done };
      this.#store.publish({ t: 'reclaim', key: this.key, window, from: this.#replica });
    });
  }
}
