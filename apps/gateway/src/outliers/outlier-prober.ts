import type { EndpointRecord, OutlierRecord, Stage } from '@triad/bus';
import { originOf } from '@triad/connectors';
import type { OutlierPolicy } from '@triad/crd';
import type { Logger } from '@triad/runtime';
import type { OutlierTable } from '@triad/scheduling';

/** How often the prober looks for ejected endpoints due a probe (each is probed at its policy's interval). */
const TICK_MS = 100;

/** What the prober needs to know about an endpoint: its address and its ModelServer's outlier policy. */
export interface ProbeTargets {
  endpoint(key: string): EndpointRecord | undefined;
  policy(namespace: string, modelServer: string): OutlierPolicy | undefined;
}

/** Where a successful probe goes (the detector writes the restore with compare-and-set). */
export interface ProbeSink {
  probeSucceeded(server: string, endpoint: string, stage: Stage): void;
}

/**
 * Active probing of ejected endpoints (`trafficPolicy.outlierDetection.probe`): while an endpoint is ejected, a
 * cheap GET (`/health` by default, `/v1/models` works too) goes to it every `interval`; a 2xx within `timeout` ends
 * the ejection early, for every replica (the shared record turns healthy). A failed probe changes nothing: the
 * ejection runs its course, then real traffic probes the endpoint as before. Every gateway replica probes; the
 * compare-and-set write makes the first success the one that counts.
 */
export class OutlierProber {
  readonly #table: OutlierTable;
  readonly #targets: ProbeTargets;
  readonly #sink: ProbeSink;
  readonly #logger: Logger;
  readonly #now: () => number;
  /** `endpoint stage` → when it is due its next probe (ms), or in flight. */
  readonly #due = new Map<string, number>();
  readonly #inFlight = new Set<string>();
  readonly #aborts = new Set<AbortController>();
  #timer: NodeJS.Timeout | undefined;

  constructor(table: OutlierTable, targets: ProbeTargets, sink: ProbeSink, logger: Logger, now: () => number = Date.now) {
    this.#table = table;
    this.#targets = targets;
    this.#sink = sink;
    this.#logger = logger;
    this.#now = now;
  }

  start(): void {
    this.#timer ??= setInterval(() => this.tick(), TICK_MS);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    for (const a of this.#aborts) a.abort();
  }

  /** Sends the probes that are due (public for tests that drive time themselves). */
  tick(): void {
    const now = this.#now();
    const seen = new Set<string>();
    for (const r of this.#table.records()) {
      if (r.state !== 'ejected' || r.ejectedUntil <= now) continue;
      const id = `${r.endpoint} ${r.stage}`;
      seen.add(id);
      if (this.#inFlight.has(id)) continue;
      const e = this.#targets.endpoint(r.endpoint);
      const probe = e === undefined ? undefined : this.#targets.policy(e.namespace, e.modelServer)?.probe;
      if (e === undefined || probe === undefined) continue;
      const due = this.#due.get(id);
      if (due === undefined) {
        // The first probe one interval after the ejection, not at once: the failure that ejected it is fresh.
        this.#due.set(id, Math.max(now, r.ejectedAt) + probe.intervalMs);
        continue;
      }
      if (due > now) continue;
      this.#due.set(id, now + probe.intervalMs);
      this.#probe(id, r, e, probe);
    }
    for (const id of this.#due.keys()) if (!seen.has(id)) this.#due.delete(id);
  }

  #probe(id: string, r: OutlierRecord, e: EndpointRecord, probe: NonNullable<OutlierPolicy['probe']>): void {
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
