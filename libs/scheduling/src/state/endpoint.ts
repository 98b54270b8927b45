import { effectiveScrapedAt, type EndpointRecord, type EndpointRef } from '@triad/bus';
import { hashString32 } from '../hashing/fast-hash';

/**
 * An endpoint as plugins see it through `Candidates.endpoint(i)`: its key, the latest record from the
 * pod-watcher, a stable key hash, and the metrics the index copies into its typed-array columns (flat here, so the
 * copy reads one object with fixed fields rather than `record.metrics.x`, whose shape varies with optional fields).
 */
export interface Endpoint {
  /** KV key `ns.modelserver.pod`. */
  readonly key: string;
  /** Latest record; replaced in place when the pod-watcher writes new metrics. */
  readonly record: EndpointRecord;
  /** 32-bit hash of `key` (tie-breaking, rendezvous hashing). */
  readonly keyHash: number;
  /** PD group label value, or undefined. */
  readonly group: string | undefined;
  /** Engine's running requests (metrics.running). */
  readonly running: number;
  /** Engine's waiting requests (metrics.waiting). */
  readonly waiting: number;
  /**
   * The most requests the engine has been seen running since this endpoint appeared: a lower bound of its batch
   * capacity (`max_num_seqs` once it has been full), which the scrapes alone never state.
   */
  readonly peakRunning: number;
  /** KV-cache usage 0..1. */
  readonly kvCacheUsage: number;
  /** Mean TTFT over the last scrape interval, ms; 0 when there is no data. */
  readonly ttftMs: number;
  /** Mean TPOT over the last scrape interval, ms; 0 when there is no data. */
  readonly tpotMs: number;
  /** When the TTFT/TPOT means last took in new observations (ms since epoch; `scrapedAt` from older writers). */
  readonly latencyAt: number;
  /**
   * Time of the last successful scrape (0 = never): the record's own, or the later time its pod-watcher replica
   * confirmed its engines at (scrape freshness).
   */
  readonly scrapedAt: number;
  /** The pod-watcher marked the metrics stale (scrapes failing). */
  readonly stale: boolean;
}

/** A counter owned by an in-flight tracker, read by reference so the hot path avoids a map lookup. */
export interface InflightCell {
  count: number;
}

/**
 * The index's endpoint object. Besides the public fields it records which list holds it (for O(1) removal and
 * position lookups) and caches its in-flight cell, so the hot path needs no per-request maps.
 */
export class IndexedEndpoint implements Endpoint {
  readonly key: string;
  readonly keyHash: number;
  record: EndpointRecord;
  group: string | undefined = undefined;
  running = 0;
  waiting = 0;
  peakRunning = 0;
  kvCacheUsage = 0;
  ttftMs = 0;
  tpotMs = 0;
  latencyAt = 0;
  scrapedAt = 0;
  stale = false;
  /** Wire form sent in decisions; rebuilt only when the address changes. */
  ref: EndpointRef;
  /** Which list of its ModelServer pool holds it ('' = none, e.g. not ready) and where. */
  listId = '';
  listPos = -1;
  /** In-flight cell and the tracker it belongs to. */
  cell: InflightCell | undefined;
  cellOwner: object | undefined;

  constructor(key: string, record: EndpointRecord) {
    this.key = key;
    this.keyHash = hashString32(key);
    this.record = record;
    this.ref = toRef(key, record);
    this.#copyHotFields(record);
  }

  /** Takes a new record; returns true when the role, group or readiness changed (list membership). */
  update(record: EndpointRecord): boolean {
    const prev = this.record;
    this.record = record;
    this.#copyHotFields(record);
    if (
      prev.ip !== record.ip ||
      prev.port !== record.port ||
      prev.bootstrapPort !== record.bootstrapPort ||
      prev.pod !== record.pod ||
      prev.dpSize !== record.dpSize ||
      prev.mooncake?.flow !== record.mooncake?.flow ||
      prev.mooncake?.engineIds?.join(',') !== record.mooncake?.engineIds?.join(',') ||
      prev.ecControlAddresses?.join(',') !== record.ecControlAddresses?.join(',')
    ) {
      this.ref = toRef(this.key, record);
    }
    return (
      prev.role !== record.role ||
      prev.group !== record.group ||
      prev.ready !== record.ready ||
      prev.namespace !== record.namespace ||
      prev.modelServer !== record.modelServer
    );
  }

  /**
   * Ages the metrics by the scrape freshness of the record's pod-watcher replica (`effectiveScrapedAt`: its
   * confirmation when later than the record's own scrape time; a never-scraped record stays so). True when the
   * time moved.
   */
  confirm(confirmedAt: ReadonlyMap<string, number>): boolean {
    const at = effectiveScrapedAt(this.record, confirmedAt);
    if (at === this.scrapedAt) return false;
    this.scrapedAt = at;
    return true;
  }

  #copyHotFields(r: EndpointRecord): void {
    const m = r.metrics;
    this.group = r.group;
    this.running = m.running;
    this.waiting = m.waiting;
    if (m.running > this.peakRunning) this.peakRunning = m.running;
    this.kvCacheUsage = m.kvCacheUsage;
    this.ttftMs = m.ttftMs ?? 0;
    this.tpotMs = m.tpotMs ?? 0;
    this.latencyAt = m.latencyAt ?? m.scrapedAt;
    this.scrapedAt = m.scrapedAt;
    this.stale = m.stale;
  }
}

function toRef(key: string, r: EndpointRecord): EndpointRef {
  const ref: EndpointRef = { key, pod: r.pod, ip: r.ip, port: r.port };
  if (r.bootstrapPort !== undefined) ref.bootstrapPort = r.bootstrapPort;
  if (r.dpSize !== undefined) ref.dpSize = r.dpSize;
  if (r.ecControlAddresses !== undefined) ref.ecControlAddresses = Object.freeze([...r.ecControlAddresses]) as string[];
  const mc = r.mooncake;
  if (mc !== undefined) {
    ref.mooncake = Object.freeze(
      mc.engineIds === undefined ? { flow: mc.flow } : { flow: mc.flow, engineIds: Object.freeze([...mc.engineIds]) as string[] },
    );
  }
  return Object.freeze(ref);
}
