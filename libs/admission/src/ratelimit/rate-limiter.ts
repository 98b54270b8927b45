import type { AdmissionLogger } from '../logger';
import type { AdmissionMetrics } from '../metrics';
import { Rejections, retryAfterSeconds, type AdmissionRejection } from '../rejection';
import { ZERO, type TokenPair } from './budget-record';
import type { BudgetStore, LeaseMessage } from './budget-store';
import { LeaseAccount, type LeaseOptions, type ReserveOutcome } from './lease-account';
import type { Scope } from './scopes';

interface ReservedPart {
  readonly account: LeaseAccount;
  readonly window: number;
  readonly reserved: TokenPair;
}

/** Tokens held for one admitted request in each of its scopes, until {@link settle} says what was used. */
export class Reservation {
  readonly #parts: readonly ReservedPart[];
  #settled = false;

  constructor(parts: readonly ReservedPart[]) {
    this.#parts = parts;
  }

  /** Per scope key, what was reserved (input estimate, output max_tokens clamped to the limit). */
  get reserved(): ReadonlyMap<string, TokenPair> {
    return new Map(this.#parts.map((p) => [p.account.key, p.reserved]));
  }

  /** Reconciles every scope with the actual usage; without usage everything is given back. Idempotent. */
  settle(actual: TokenPair | undefined): void {
    if (this.#settled) return;
    this.#settled = true;
    for (const p of this.#parts) p.account.reconcile(p.window, p.reserved, actual ?? ZERO);
  }
}

export type LimitDecision = { ok: true; reservation: Reservation } | { ok: false; rejection: AdmissionRejection };

export interface RateLimiterOptions {
  readonly replica: string;
  readonly now: () => number;
  readonly lease: LeaseOptions;
  readonly metrics: AdmissionMetrics;
  readonly logger: AdmissionLogger;
  readonly cleanupIntervalMs: number;
}

export interface ReserveContext {
  readonly model: string;
  readonly path: string;
  readonly failMode: 'open' | 'closed';
}

/**
 * Reserves a request's tokens in each of its scopes, in order; a refusal in a later scope gives back what the
 * earlier ones reserved. Decisions that the local leases can make are returned synchronously.
 */
export class RateLimiter {
  readonly #opts: RateLimiterOptions;
  readonly #accounts = new Map<BudgetStore, Map<string, LeaseAccount>>();
  readonly #unsubscribe: (() => void)[] = [];
  readonly #tickTimer: NodeJS.Timeout;
  readonly #sweepTimer: NodeJS.Timeout;

  constructor(opts: RateLimiterOptions) {
    this.#opts = opts;
    this.#tickTimer = setInterval(() => this.#tick(), Math.max(10, Math.min(250, opts.lease.ttlMs / 4)));
    this.#tickTimer.unref();
    // Jittered so replicas do not all list the bucket at the same moment.
    this.#sweepTimer = setInterval(() => void this.#sweep(), opts.cleanupIntervalMs * (0.75 + Math.random() / 2));
    this.#sweepTimer.unref();
  }

  reserve(scopes: readonly Scope[], cost: TokenPair, ctx: ReserveContext): LimitDecision | Promise<LimitDecision> {
    return this.#from(scopes, 0, cost, ctx, []);
  }

  #from(
    scopes: readonly Scope[],
    start: number,
    cost: TokenPair,
    ctx: ReserveContext,
    parts: ReservedPart[],
  ): LimitDecision | Promise<LimitDecision> {
    for (let i = start; i < scopes.length; i++) {
      const scope = scopes[i];
      const { limits } = scope.settings;
      if (limits.in !== undefined && cost.in > limits.in) {
        this.#cancel(parts);
        this.#opts.metrics.rateLimitExceeded.inc({ model: ctx.model, limit_type: 'input', path: ctx.path });
        return { ok: false, rejection: Rejections.requestTooLarge(scope.label, cost.in, limits.in) };
      }
      // A max_tokens beyond the whole limit reserves the whole limit: actual usage is charged afterwards anyway.
      const want = { in: cost.in, out: limits.out !== undefined ? Math.min(cost.out, limits.out) : cost.out };
      const account = this.#account(scope);
      const outcome = account.reserve(want, scope.settings);
      if (outcome instanceof Promise) {
        return outcome.then((o) => this.#apply(scope, account, want, o, ctx, parts) ?? this.#from(scopes, i + 1, cost, ctx, parts));
      }
      const refused = this.#apply(scope, account, want, outcome, ctx, parts);
      if (refused) return refused;
    }
    return { ok: true, reservation: new Reservation(parts) };
  }

  /** Records an outcome; returns the refusal, or undefined to go on with the next scope. */
  #apply(
    scope: Scope,
    account: LeaseAccount,
    want: TokenPair,
    o: ReserveOutcome,
    ctx: ReserveContext,
    parts: ReservedPart[],
  ): LimitDecision | undefined {
    const { metrics } = this.#opts;
    if (o.ok) {
      parts.push({ account, window: o.window, reserved: want });
      metrics.budgetPath.inc({ backend: scope.store.backend, path: o.local ? 'local' : 'store' });
      return undefined;
    }
    if (o.kind === 'limited') {
      this.#cancel(parts);
      const kind = o.dim === 'in' ? 'input' : 'output';
      metrics.rateLimitExceeded.inc({ model: ctx.model, limit_type: kind, path: ctx.path });
      return { ok: false, rejection: Rejections.rateLimited(kind, scope.label, retryAfterSeconds(this.#opts.now(), o.retryAt)) };
    }
    metrics.storeErrors.inc({ backend: scope.store.backend, op: 'reserve' });
    this.#opts.logger.warn(
      { scope: scope.key, backend: scope.store.backend, error: o.error.message, failMode: ctx.failMode },
      'rate-limit store unavailable',
    );
    if (ctx.failMode === 'open') {
      metrics.failOpen.inc({ backend: scope.store.backend });
      return undefined;
    }
    this.#cancel(parts);
    return { ok: false, rejection: Rejections.storeUnavailable() };
  }

  #cancel(parts: readonly ReservedPart[]): void {
    for (const p of parts) p.account.reconcile(p.window, p.reserved, ZERO);
  }

  #account(scope: Scope): LeaseAccount {
    let byKey = this.#accounts.get(scope.store);
    if (!byKey) {
      byKey = new Map();
      this.#accounts.set(scope.store, byKey);
      const route = byKey;
      this.#unsubscribe.push(scope.store.subscribe((m: LeaseMessage) => route.get(m.key)?.onMessage(m)));
    }
    let account = byKey.get(scope.key);
    if (!account) {
      account = new LeaseAccount(scope.key, scope.store, this.#opts.replica, this.#opts.now, this.#opts.lease, scope.settings);
      byKey.set(scope.key, account);
    }
    return account;
  }

  #tick(): void {
    for (const byKey of this.#accounts.values()) {
      for (const [key, account] of byKey) {
        if (account.idle()) byKey.delete(key);
        else account.tick();
      }
    }
  }

  async #sweep(): Promise<void> {
    for (const store of this.#accounts.keys()) {
      try {
        const removed = await store.sweep(this.#opts.now());
        if (removed > 0) this.#opts.logger.debug({ backend: store.backend, removed }, 'removed stale budget records');
      } catch (err) {
        this.#opts.logger.debug({ backend: store.backend, error: (err as Error).message }, 'budget sweep failed');
      }
    }
  }

  /** Number of scopes this replica currently tracks (for tests and debugging). */
  get accountCount(): number {
    let n = 0;
    for (const m of this.#accounts.values()) n += m.size;
    return n;
  }

  /** Gives every lease back (bounded by `timeoutMs`) and stops the timers. */
  async close(timeoutMs = 2_000): Promise<void> {
    clearInterval(this.#tickTimer);
    clearInterval(this.#sweepTimer);
    const all = [...this.#accounts.values()].flatMap((m) => [...m.values()]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(all.map((a) => a.close())),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
    this.#unsubscribe.forEach((u) => u());
  }
}
