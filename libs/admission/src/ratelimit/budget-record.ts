import { z } from 'zod';

/** Input and output token amounts, the two dimensions every limit has. */
export interface TokenPair {
  readonly in: number;
  readonly out: number;
}
/** Tokens per unit per dimension; an undefined dimension is unlimited. */
export interface Limits {
  readonly in?: number;
  readonly out?: number;
}
export const DIMS = ['in', 'out'] as const;
export type Dim = (typeof DIMS)[number];
export const ZERO: TokenPair = { in: 0, out: 0 };

const PairSchema = z.object({ in: z.number(), out: z.number() });

/**
 * The shared state of one limit scope (a model, or an identity), one store key per scope. The window id lives
 * in the value: the first writer in a new window rolls the record over, so no per-key TTL is needed.
 * - `used`: tokens charged in `window` by settled reservations, overruns and reclaimed leases (refunds subtract).
 * - `leases`: budget handed to replicas to spend locally without a round-trip, with a wall-clock expiry.
 * - `carry`: the previous window's signed overflow (debt when positive), excluding `prevLeases`.
 * - `prevLeases`: leases still open when the window rolled; counted as spent (the safe side) until their holder
 *   reports what it really spent.
 * - `demand`: a replica found the budget tied up in others' leases; no new leases until the window ends.
 * - `refunds`: per `<replica>@<window>` (this window and the previous one), the refunds of that window the
 *   replica has reported in total. Replicas report totals, not increments, so a report that is sent again after
 *   a write timed out but landed applies nothing twice.
 */
export const BudgetRecordSchema = z.object({
  v: z.literal(1),
  unitMs: z.number().int().positive(),
  window: z.number().int(),
  used: PairSchema,
  carry: PairSchema,
  leases: z.record(z.string(), PairSchema.extend({ exp: z.number() })),
  prevLeases: z.record(z.string(), PairSchema),
  demand: z.boolean(),
  // Optional on read: records written before refunds were reported as totals have none.
  refunds: z.record(z.string(), PairSchema).default({}),
});
export type BudgetRecord = z.infer<typeof BudgetRecordSchema>;

/** What one replica spent or gave back in one window since it last settled. */
export interface WindowUsage {
  readonly window: number;
  /** Spent from this replica's lease (only counts while the lease is still on record). */
  readonly consumed: TokenPair;
  /**
   * Reservations of that window given back after the fact, **in total so far** (the store applies what is beyond
   * the total it last recorded for this replica and window, so resending a report changes nothing).
   */
  readonly refunded: TokenPair;
}

export interface SettleRequest {
  readonly replica: string;
  readonly now: number;
  readonly unitMs: number;
  readonly limits: Limits;
  /** Largest debt carried into a window (the bounded negative balance). */
  readonly maxDebt: TokenPair;
  readonly current: WindowUsage;
  readonly previous?: WindowUsage;
  /** Overruns (actual beyond reserved) to charge to whatever window is current. */
  readonly debit: TokenPair;
  /** Reservations waiting for budget, in arrival order. */
  readonly needs: readonly TokenPair[];
  readonly wantLease: boolean;
  /** Keep this replica's entry even with no lease, because reservations it will reconcile are outstanding. */
  readonly keepEntry: boolean;
  /**
   * Report refunds and overruns and extend the lease's expiry, but leave the lease itself (and what was spent
   * from it) alone: the replica goes on spending it while this write is in flight. Needs must be empty.
   */
  readonly keepLease?: boolean;
  readonly lease: { readonly maxFraction: number; readonly ttlMs: number; readonly skewMarginMs: number };
}

export interface SettleOutcome {
  readonly record: BudgetRecord;
  /** False when nothing changed, so no write is needed. */
  readonly write: boolean;
  readonly window: number;
  readonly windowEndsAt: number;
  /** Per need: undefined when admitted, else the dimension that lacked budget. */
  readonly blocked: readonly (Dim | undefined)[];
  readonly grant: TokenPair;
  /** Other replicas whose leases hold budget a blocked need could use (to ask them to return it). */
  readonly holders: readonly string[];
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type MPair = Mutable<TokenPair>;

function sumOf(map: Readonly<Record<string, TokenPair>>, dim: Dim, except?: string): number {
  let s = 0;
  for (const [k, v] of Object.entries(map)) if (k !== except) s += v[dim];
  return s;
}

/** The debt a record's window started with: previous overflow plus unreported previous leases, bounded. */
function debtOf(rec: BudgetRecord, dim: Dim, maxDebt: TokenPair): number {
  return Math.min(maxDebt[dim], Math.max(0, rec.carry[dim] + sumOf(rec.prevLeases, dim)));
}

/** Budget left for new reservations in `dim`, Infinity when unlimited. */
export function headroom(rec: BudgetRecord, dim: Dim, limits: Limits, maxDebt: TokenPair, except?: string): number {
  const limit = limits[dim];
  if (limit === undefined) return Infinity;
  return limit - debtOf(rec, dim, maxDebt) - rec.used[dim] - sumOf(rec.leases, dim, except);
}

export function freshRecord(unitMs: number, window: number): BudgetRecord {
  return { v: 1, unitMs, window, used: { ...ZERO }, carry: { ...ZERO }, leases: {}, prevLeases: {}, demand: false, refunds: {} };
}

/** Moves a record to `window`, turning what is known of the old window into carry. */
function rollRecord(prev: BudgetRecord, window: number, limits: Limits, maxDebt: TokenPair): BudgetRecord {
  const steps = window - prev.window;
  const next = freshRecord(prev.unitMs, window);
  for (const dim of DIMS) {
    const limit = limits[dim];
    if (limit === undefined) continue;
    const startDebt = debtOf(prev, dim, maxDebt);
    // One window back, open leases stay separate so their holders can still report; further back they count.
    const open = steps === 1 ? 0 : sumOf(prev.leases, dim);
    (next.carry as MPair)[dim] = startDebt + prev.used[dim] + open - steps * limit;
  }
  if (steps === 1) {
    for (const [r, l] of Object.entries(prev.leases)) next.prevLeases[r] = { in: l.in, out: l.out };
    // The old window's refund totals stay known while it can still be reported on (as the previous window).
    for (const [k, v] of Object.entries(prev.refunds)) if (windowOfRefundKey(k) === prev.window) next.refunds[k] = { ...v };
  }
  return next;
}

const refundKey = (replica: string, window: number): string => `${replica}@${window}`;
const windowOfRefundKey = (key: string): number => Number(key.slice(key.lastIndexOf('@') + 1));

function clone(rec: BudgetRecord): BudgetRecord {
  return {
    ...rec,
    refunds: Object.fromEntries(Object.entries(rec.refunds).map(([k, v]) => [k, { ...v }])),
    used: { ...rec.used },
    carry: { ...rec.carry },
    leases: Object.fromEntries(Object.entries(rec.leases).map(([k, v]) => [k, { ...v }])),
    prevLeases: Object.fromEntries(Object.entries(rec.prevLeases).map(([k, v]) => [k, { ...v }])),
  };
}

const nonZero = (p: TokenPair): boolean => p.in !== 0 || p.out !== 0;

/**
 * One replica's compare-and-set step on a scope: roll the window if needed, apply what the replica spent and
 * gave back, take back expired leases, admit the waiting reservations that fit, and size the replica's new lease.
 * Pure: the store calls it again on a fresh read whenever the write loses a race.
 */
export function settleRecord(prev: BudgetRecord | undefined, req: SettleRequest): SettleOutcome {
  const clockWindow = Math.floor(req.now / req.unitMs);
  let rec: BudgetRecord;
  let write = false;
  if (!prev || prev.unitMs !== req.unitMs) [rec, write] = [freshRecord(req.unitMs, clockWindow), true];
  else if (prev.window < clockWindow) [rec, write] = [rollRecord(prev, clockWindow, req.limits, req.maxDebt), true];
  else rec = clone(prev); // a replica whose clock runs ahead rolled it already: the record's window wins
  const used = rec.used as MPair;
  const carry = rec.carry as MPair;
  const hadEntry = rec.leases[req.replica] !== undefined;
  const kept = req.keepLease && hadEntry && req.current.window === rec.window ? rec.leases[req.replica] : undefined;
  for (const usage of [req.current, req.previous]) {
    if (!usage) continue;
    if (usage.window !== rec.window && usage.window !== rec.window - 1) continue;
    // Refunds are reported as totals: apply what is beyond the total recorded for this replica and window.
    const key = refundKey(req.replica, usage.window);
    const known = rec.refunds[key] ?? ZERO;
    const refund: TokenPair = { in: Math.max(0, usage.refunded.in - known.in), out: Math.max(0, usage.refunded.out - known.out) };
    if (nonZero(refund)) rec.refunds[key] = { in: Math.max(known.in, usage.refunded.in), out: Math.max(known.out, usage.refunded.out) };
    const changed = nonZero(usage.consumed) || nonZero(refund);
    if (usage.window === rec.window) {
      if (changed) for (const dim of DIMS) used[dim] += (hadEntry ? usage.consumed[dim] : 0) - refund[dim];
      write ||= changed;
    } else {
      // The replica reports everything it spent in the previous window: its open lease there is settled.
      // Not so for a keep-lease report, which leaves out what was spent from the lease.
      const open = rec.prevLeases[req.replica] !== undefined;
      const complete = !(req.keepLease && usage === req.current);
      if (changed) for (const dim of DIMS) carry[dim] += (open && complete ? usage.consumed[dim] : 0) - refund[dim];
      if (open && complete) delete rec.prevLeases[req.replica];
      write ||= changed || (open && complete);
    }
  }
  if (hadEntry) {
    delete rec.leases[req.replica];
    write = true;
  }
  if (kept) {
    // The lease stays as it is; only its expiry moves. Consumption from it is reported later, in full.
    rec.leases[req.replica] = { in: kept.in, out: kept.out, exp: req.now + req.lease.ttlMs };
  }
  if (nonZero(req.debit)) {
    for (const dim of DIMS) used[dim] += req.debit[dim];
    write = true;
  }
  for (const [r, l] of Object.entries(rec.leases)) {
    if (req.now > l.exp + req.lease.skewMarginMs) {
      // The holder is gone or cut off; it stopped spending at `exp` by its own clock. Charge the whole lease.
      used.in += l.in;
      used.out += l.out;
      delete rec.leases[r];
      write = true;
    }
  }
  const room: MPair = { in: headroom(rec, 'in', req.limits, req.maxDebt), out: headroom(rec, 'out', req.limits, req.maxDebt) };
  const blocked: (Dim | undefined)[] = [];
  for (const need of req.needs) {
    const short = DIMS.find((d) => need[d] > room[d]);
    blocked.push(short);
    if (short) continue;
    for (const dim of DIMS) {
      room[dim] -= need[dim];
      used[dim] += need[dim];
    }
    write = true;
  }
  const blockedDims = new Set(blocked.filter((d): d is Dim => d !== undefined));
  const holders = Object.entries(rec.leases)
    .filter(([, l]) => [...blockedDims].some((d) => l[d] > 0))
    .map(([r]) => r);
  if (holders.length > 0 && !rec.demand) {
    rec.demand = true;
    write = true;
  }
  if (kept) {
    return {
      record: rec,
      write,
      window: rec.window,
      windowEndsAt: (rec.window + 1) * rec.unitMs,
      blocked,
      grant: { in: kept.in, out: kept.out },
      holders,
    };
  }
  const grant = leaseGrant(rec, req, room);
  const admittedAny = blocked.some((b) => b === undefined) && req.needs.length > 0;
  if (nonZero(grant) || admittedAny || req.keepEntry) {
    rec.leases[req.replica] = { in: grant.in, out: grant.out, exp: req.now + req.lease.ttlMs };
    write = true;
  }
  return { record: rec, write, window: rec.window, windowEndsAt: (rec.window + 1) * rec.unitMs, blocked, grant, holders };
}

/**
 * Lease size: a share of what is left (so several replicas can each hold one) capped at `maxFraction` of the
 * limit. None while another replica is waiting for budget: near the limit every reservation goes to the store.
 */
function leaseGrant(rec: BudgetRecord, req: SettleRequest, room: TokenPair): TokenPair {
  if (!req.wantLease || rec.demand || req.lease.maxFraction <= 0) return ZERO;
  const sharers = Object.keys(rec.leases).filter((r) => r !== req.replica).length + 2;
  const size = (dim: Dim): number => {
    const limit = req.limits[dim];
    if (limit === undefined || room[dim] <= 0) return 0;
    return Math.floor(Math.min(req.lease.maxFraction * limit, room[dim] / sharers));
  };
  return { in: size('in'), out: size('out') };
}
