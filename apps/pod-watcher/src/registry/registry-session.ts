import type { WantedEncoder } from './registry-plan';

/**
 * What the watcher believes of one wanted encoder in one registry:
 * - `pending`: not registered by the watcher since the registry's current session began (waits to be healthy);
 * - `registered`: registered and listed;
 * - `evicted`: registered, then gone from the listing without the watcher removing it: SGLang's health check evicted
 *   it (or someone unregistered it). SGLang keeps probing evicted encoders and re-adds them when they answer, so the
 *   watcher leaves it alone until SGLang's evicted TTL has passed (then SGLang has forgotten it for good).
 */
export type EntryState = 'pending' | 'registered' | 'evicted';

export interface Entry {
  state: EntryState;
  /** When it entered this state (ms). */
  since: number;
}

/** What one pass over a registry listing decides. */
export interface PassDecision {
  readonly register: readonly string[];
  readonly unregister: readonly string[];
  /** Registered encoders the listing no longer shows (SGLang evicted them). */
  readonly evicted: readonly string[];
  /** Evicted encoders listed again (SGLang revived them). */
  readonly revived: readonly string[];
  /** Evicted encoders registered again because SGLang's evicted TTL has passed. */
  readonly afterTtl: readonly string[];
}

/**
 * The watcher's side of one registry between two restarts of the server that holds it (a session). The rule that
 * keeps the watcher and SGLang's own health checks from fighting: an encoder is registered once, when it is wanted and
 * healthy; it is unregistered when it stops being wanted (pod deleted or not Ready, or moved to another registry);
 * while it is wanted, its liveness is SGLang's business. Only a new session (the server restarted and forgot its
 * registry, or could not be reached) registers everything again.
 */
export class RegistrySession {
  readonly entries = new Map<string, Entry>();
  startedAt: number | undefined;

  /** Forgets what was registered: the next pass registers every wanted encoder (server restarted or unreachable). */
  restart(): void {
    this.startedAt = undefined;
    for (const e of this.entries.values()) e.state = 'pending';
  }

  /** Compares the wanted set with a fresh listing and decides what to do; entry states move as decided. */
  pass(want: ReadonlyMap<string, WantedEncoder>, listed: ReadonlySet<string>, now: number, evictedTtlMs: number): PassDecision {
    this.startedAt ??= now;
    const register: string[] = [];
    const evicted: string[] = [];
    const revived: string[] = [];
    const afterTtl: string[] = [];
    for (const [url, w] of want) {
      let e = this.entries.get(url);
      if (!e) this.entries.set(url, (e = { state: 'pending', since: now }));
      const present = listed.has(url);
      if (e.state === 'pending') {
        if (present) Object.assign(e, { state: 'registered', since: now });
        else if (w.healthy) register.push(url);
      } else if (e.state === 'registered') {
        if (!present) {
          Object.assign(e, { state: 'evicted', since: now });
          evicted.push(url);
        }
      } else if (present) {
        Object.assign(e, { state: 'registered', since: now });
        revived.push(url);
      } else if (now - e.since >= evictedTtlMs && w.healthy) {
        afterTtl.push(url);
      }
    }
    const unregister = new Set<string>();
    for (const url of listed) if (!want.has(url)) unregister.add(url);
    // Also those not listed: SGLang may still hold them in its revival set.
    for (const url of this.entries.keys()) if (!want.has(url)) unregister.add(url);
    return { register: [...register, ...afterTtl], unregister: [...unregister], evicted, revived, afterTtl };
  }

  /** A register call succeeded. */
  registered(url: string, now: number): void {
    const e = this.entries.get(url);
    if (e) Object.assign(e, { state: 'registered', since: now });
  }

  /** An unregister call succeeded: the watcher has nothing more to do for it. */
  unregistered(url: string): void {
    this.entries.delete(url);
  }
}
