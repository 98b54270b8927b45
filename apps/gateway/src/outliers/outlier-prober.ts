import type { EndpointRecord, OutlierRecord, Stage } from '@triad/bus';
import { originOf } from '@triad/connectors';
import type { OutlierPolicy } from '@triad/crd';
import type { Logger } from '@triad/runtime';
import type { OutlierTable } from '@triad/scheduling';

/**
 * How soon an ejected endpoint whose address or probe policy is not known yet (no probe configured, or the endpoint
 * record not here yet) is looked at again: a ModelServer update that turns probing on reaches running ejections.
 */
const RECHECK_MS = 1_000;

/** What the prober needs to know about an endpoint: its address and its ModelServer's outlier policy. */
export interface ProbeTargets {
  endpoint(key: string): EndpointRecord | undefined;
  policy(namespace: string, modelServer: string): OutlierPolicy | undefined;
}

/** Where a successful probe goes (the detector writes the restore with compare-and-set). */
export interface ProbeSink {
  probeSucceeded(server: string, endpoint: string, stage: Stage): void;
}

type Probe = NonNullable<OutlierPolicy['probe']>;

/** One ejected endpoint and stage the prober follows. */
interface Ejected {
  readonly endpoint: string;
  readonly stage: Stage;
  /** The ejection this entry follows (a new ejection of the same endpoint starts its schedule over). */
  readonly ejectedAt: number;
  /** When it is looked at next (ms on the prober's clock): its next probe, or a recheck of its policy. */
  due: number;
  /** Its address and probe policy were found: `due` is a probe time (else a recheck time). */
  resolved: boolean;
}

/**
 * Active probing of ejected endpoints (`trafficPolicy.outlierDetection.probe`): while an endpoint is ejected, a
 * cheap GET (`/health` by default, `/v1/models` works too) goes to it every `interval`; a 2xx within `timeout` ends
 * the ejection early, for every replica (the shared record turns healthy). A failed probe changes nothing: the
 * ejection runs its course, then real traffic probes the endpoint as before. Every gateway replica probes; the
 * compare-and-set write makes the first success the one that counts.
 *
 * The prober follows the table's changes, so it holds only the ejected endpoints, and one timer for the earliest of
 * their due times: no timer at all while nothing is ejected, and no scan of the healthy records.
 */
export class OutlierProber {
  readonly #table: OutlierTable;
  readonly #targets: ProbeTargets;
  readonly #sink: ProbeSink;
  readonly #logger: Logger;
  readonly #now: () => number;
  /** `endpoint stage` → the ejection followed. */
  readonly #ejected = new Map<string, Ejected>();
  readonly #inFlight = new Set<string>();
  readonly #aborts = new Set<AbortController>();
  #unsubscribe: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** When `#timer` fires (ms on the prober's clock). */
  #timerAt = Number.POSITIVE_INFINITY;

  constructor(table: OutlierTable, targets: ProbeTargets, sink: ProbeSink, logger: Logger, now: () => number = Date.now) {
    this.#table = table;
    this.#targets = targets;
    this.#sink = sink;
    this.#logger = logger;
    this.#now = now;
  }

  start(): void {
    if (this.#unsubscribe !== undefined) return;
    this.#unsubscribe = this.#table.onChange((endpoint, stage, record) => this.#changed(endpoint, stage, record));
    const now = this.#now();
    for (const r of this.#table.records()) this.#follow(r, now);
    this.#arm();
  }

  stop(): void {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#disarm();
    this.#ejected.clear();
    for (const a of this.#aborts) a.abort();
  }

  /** Ejected endpoints (per stage) the prober follows. */
  get following(): number {
    return this.#ejected.size;
  }

  /** Probes in flight. */
  get probing(): number {
    return this.#inFlight.size;
  }

  /** When the prober looks at its ejected endpoints next (its clock), or undefined when it follows none. */
  get nextAt(): number | undefined {
    return this.#ejected.size === 0 ? undefined : this.#timerAt;
  }

  /** Sends the probes that are due and drops ejections that ended (public for tests that drive time themselves). */
  tick(): void {
    const now = this.#now();
    for (const [id, e] of this.#ejected) {
      if (e.due > now) continue;
      const r = this.#table.get(e.endpoint, e.stage);
      // Ran out (half-open: real traffic probes it now); a restore or a new ejection was seen as a change already.
      if (r === undefined || r.state !== 'ejected' || r.ejectedUntil <= now) this.#ejected.delete(id);
      else this.#visit(id, e, r, now);
    }
    this.#arm();
  }

  #changed(endpoint: string, stage: Stage, record: OutlierRecord | undefined): void {
    const id = `${endpoint} ${stage}`;
    if (record === undefined || record.state !== 'ejected') {
      if (this.#ejected.delete(id)) this.#arm();
      return;
    }
    if (this.#follow(record, this.#now())) this.#arm();
  }

  /** Starts following an ejected record (unless it already is followed); true when its schedule was set. */
  #follow(r: OutlierRecord, now: number): boolean {
    if (r.state !== 'ejected' || r.ejectedUntil <= now) return false;
    const id = `${r.endpoint} ${r.stage}`;
    if (this.#ejected.get(id)?.ejectedAt === r.ejectedAt) return false;
    const e: Ejected = { endpoint: r.endpoint, stage: r.stage, ejectedAt: r.ejectedAt, due: now, resolved: false };
    this.#ejected.set(id, e);
    this.#visit(id, e, r, now);
    return true;
  }

  /** Looks at one ejected endpoint that is due: probes it, or sets when to look again. */
  #visit(id: string, e: Ejected, r: OutlierRecord, now: number): void {
    const target = this.#target(r.endpoint);
    if (target === undefined) {
      e.resolved = false;
      e.due = now + RECHECK_MS;
      return;
    }
    if (!e.resolved) {
      // The first probe one interval after the ejection, not at once: the failure that ejected it is fresh.
      e.resolved = true;
      e.due = Math.max(now, r.ejectedAt) + target.probe.intervalMs;
      return;
    }
    e.due = now + target.probe.intervalMs;
    if (!this.#inFlight.has(id)) this.#probe(id, r, target.endpoint, target.probe);
  }

  #target(key: string): { endpoint: EndpointRecord; probe: Probe } | undefined {
    const endpoint = this.#targets.endpoint(key);
    const probe = endpoint === undefined ? undefined : this.#targets.policy(endpoint.namespace, endpoint.modelServer)?.probe;
    return endpoint === undefined || probe === undefined ? undefined : { endpoint, probe };
  }

  /** One timer for the earliest due time of the followed endpoints (none when nothing is followed). */
  #arm(): void {
    let next = Number.POSITIVE_INFINITY;
    for (const e of this.#ejected.values()) if (e.due < next) next = e.due;
    if (next === this.#timerAt && this.#timer !== undefined) return;
    this.#disarm();
    if (next === Number.POSITIVE_INFINITY || this.#unsubscribe === undefined) return;
    this.#timerAt = next;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerAt = Number.POSITIVE_INFINITY;
        this.tick();
      },
      Math.max(0, next - this.#now()),
    );
    this.#timer.unref();
  }

  #disarm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
  }

  #probe(id: string, r: OutlierRecord, e: EndpointRecord, probe: Probe): void {
    this.#inFlight.add(id);
    const abort = new AbortController();
    this.#aborts.add(abort);
    const timer = setTimeout(() => abort.abort(), probe.timeoutMs);
    fetch(`${originOf(e.ip, e.port)}${probe.path}`, { signal: abort.signal })
      .then(async (res) => {
        await res.arrayBuffer().catch(() => undefined);
        if (res.status < 200 || res.status >= 300) return;
        this.#logger.info({ endpoint: r.endpoint, stage: r.stage, path: probe.path }, 'active probe answered: ending the ejection');
        this.#sink.probeSucceeded(`${e.namespace}/${e.modelServer}`, r.endpoint, r.stage);
      })
      .catch(() => undefined) // refused, reset or timed out: the endpoint stays ejected
      .finally(() => {
        clearTimeout(timer);
        this.#aborts.delete(abort);
        this.#inFlight.delete(id);
      });
  }
}
