import type { InferenceEngine } from '@triad/crd';
import type { MetricsSnapshot } from '@triad/bus';
import type { Logger } from '@triad/runtime';
import { hashString32 } from '@triad/scheduling/hashing';
import type { EngineAuth } from '../engine-credentials/engine-auth';
import type { WatcherMetrics } from '../ops/metrics';
import { sameMetrics } from '../publish/records';
import { readEngineLoad, type EngineLoad } from './engine-metrics';
import { ScrapeError, ensureOk, type EngineHttp } from './engine-http';
import { hasNewObservations, intervalMeanMs, type HistogramTotals } from './histogram-mean';
import { parseModelIds } from './models';
import { SERVER_INFO_PATHS, parseServerInfo, sameServerInfo, type ServerInfoPath, type SglangServerInfo } from './server-info';
import { probeMooncakeBootstrap, sameProbe, type MooncakeProbe } from './mooncake-bootstrap';

/** What the scraper knows of one engine address. */
export interface TargetView {
  readonly metrics: MetricsSnapshot;
  /** Model ids from GET /v1/models (base model and LoRA adapters); empty until the first answer. */
  readonly models: readonly string[];
  /** SGLang: the engine's `/server_info` (fallback `/get_server_info`) as last read; absent until read. */
  readonly serverInfo?: SglangServerInfo;
  /** vLLM Mooncake prefill: what its bootstrap port's `GET /query` said; absent until asked. */
  readonly mooncake?: MooncakeProbe;
}

export interface ScraperOptions {
  readonly intervalMs: number;
  /** How often `/v1/models` is read again (also for a new engine, and with the scrape after a failing one answers again). */
  readonly modelsIntervalMs: number;
  /**
   * SGLang `/server_info` refresh, and the vLLM Mooncake bootstrap probe's (both are also re-read at once when an
   * engine answers again after failing scrapes: it may have restarted).
   */
  readonly serverInfoIntervalMs?: number;
  readonly concurrency: number;
  readonly http: EngineHttp;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
  /**
   * Called after a target's metrics, models or server info changed (or its scrape failed), and, with
   * `reportEveryMs`, at least that often while its scrapes succeed without change.
   */
  readonly onUpdate: (targetId: string) => void;
  /**
   * How often an unchanged engine is reported anyway, with the scrape time of that moment (0: after every scrape;
   * default: never). Between reports its view, scrape time included, stays as last reported: an engine whose numbers
   * do not move costs its scrape and nothing else (no record is built, compared or kept for it); readers learn it is
   * still current from this replica's scrape freshness (`confirmedSince`).
   */
  readonly reportEveryMs?: number;
  /**
   * Whether this replica scrapes the target (its scrape shard); default all. Targets of other shards are known
   * (their placements exist here too) but left to their owner. Asked when a target is added and again on
   * `rescope()` (the shards or the writer changed) and `reown(id)` (the target's placements changed).
   */
  readonly owned?: (targetId: string) => boolean;
  /**
   * The `Authorization` for a target's API reads (`/v1/models`, SGLang `/server_info`: what an engine started with
   * `--api-key` checks; `/metrics` is never checked and goes without), asked at each read so a rotated credential
   * is used by the next one. Absent, or no `header`: the reads carry none.
   */
  readonly engineAuth?: (targetId: string) => EngineAuth | undefined;
  /**
   * Targets known before `start()` are first scraped then (default: at once). The watcher starts the scraper once
   * the source's first full state is in, Secrets included, so a first API read is not refused for want of an engine
   * key still on its way (and the first scrape still reads the model list with the metrics).
   */
  readonly holdUntilStart?: boolean;
  /** How often a refusal (401/403) that goes on unchanged is logged again per engine and path (default 5 min). */
  readonly refusedLogEveryMs?: number;
  /** The scraper's clock (refusal backoff and log spacing, scrape times); default `Date.now`. */
  readonly now?: () => number;
}

interface Target {
  readonly id: string;
  readonly baseUrl: string;
  readonly metricsUrl: string;
  engine: InferenceEngine;
  /** Fixed position of this target within the scrape interval (a hash of its address). */
  readonly phase: number;
  /** Placements using this address (several ModelServers may share a pod and port). */
  refs: number;
  view: TargetView;
  ttftTotals: HistogramTotals | undefined;
  tpotTotals: HistogramTotals | undefined;
  modelsAt: number;
  /** Last successful server-info read (0 = never), and the route that answered. */
  infoAt: number;
  infoPath: ServerInfoPath;
  /** vLLM Mooncake prefill: its bootstrap server's `/query` URL, and when it was last asked (0 = never). */
  bootstrapUrl: string | undefined;
  bootstrapAt: number;
  queued: boolean;
  removed: boolean;
  /** In this replica's shard at the last look. */
  mine: boolean;
  /** When the scrape in flight started. */
  started: number;
  /** API reads the engine refuses (401/403), by path (undefined while none is). */
  refused: Map<ApiPath, RefusedRead> | undefined;
  /** Time of the last successful metrics scrape since this replica owns the target (0: none yet). */
  confirmedAt: number;
  /** Reads the engine's load from a metrics answer (made once per target: the scrape loop allocates none per scrape). */
  readonly readLoad: (status: number, page: Buffer) => EngineLoad;
  /** Takes a metrics-only scrape's outcome. */
  readonly onLoad: (err: unknown, load: EngineLoad | undefined) => void;
}

/** The engine API routes the watcher reads (`/server_info` stands for its `/get_server_info` fallback too). */
type ApiPath = '/v1/models' | '/server_info';

/** An API read of one target that the engine refuses (401/403), kept until the engine accepts it again. */
interface RefusedRead {
  /** What the last warning said (status and `from`), and when it was logged. */
  readonly logged: string;
  readonly loggedAt: number;
  /** What the refused read sent: a read that would send another `from` or header goes at once. Never logged. */
  readonly from: string;
  readonly header: string | undefined;
  /** Refusals in a row of what is sent now. */
  readonly refusals: number;
  /** The read waits until then (0: it goes with the next scrape). */
  retryAt: number;
}

/**
 * The longest wait between two reads of a route an engine refuses while what the watcher sends stays the same
 * (unless the route's own interval is longer). A key rotated on the engine side alone is seen within it.
 */
const REFUSED_BACKOFF_CAP_MS = 300_000;

/** Slots per scrape interval (each a twentieth of it, at least 10 ms). */
const SLOTS = 20;

const NEVER_SCRAPED: MetricsSnapshot = Object.freeze({ running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: 0, stale: false });

/**
 * Scrapes every engine address on a fixed interval with bounded concurrency. Each address is scraped on its own:
 * a slow or dead engine holds one worker until its timeout and never delays the others' cycle (Kthena waited
 * for the whole pass). A failed scrape keeps the last good numbers and marks the snapshot stale with the error;
 * the endpoint is never dropped for it.
 */
export class Scraper {
  readonly #targets = new Map<string, Target>();
  /** Targets by the slot of the interval they are scraped in: a tick looks at its own slot's, not at every target. */
  readonly #bySlot: Set<Target>[];
  readonly #slotMs: number;
  readonly #queue: Target[] = [];
  readonly #opts: ScraperOptions;
  readonly #now: () => number;
  /** The counter of successful metrics scrapes, its labels resolved once (it counts thousands a second). */
  readonly #metricsOk: { inc(): void } | undefined;
  #active = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #idle = new Set<() => void>();

  constructor(options: ScraperOptions) {
    this.#opts = options;
    this.#now = options.now ?? Date.now;
    this.#slotMs = Math.max(10, Math.floor(options.intervalMs / SLOTS));
    this.#bySlot = Array.from({ length: Math.max(1, Math.round(options.intervalMs / this.#slotMs)) }, () => new Set<Target>());
    this.#metricsOk = options.metrics?.scrapes.labels({ what: 'metrics', result: 'ok' });
  }

  /**
   * Scrapes every target once per interval, spread over the interval: each target has a fixed phase (a slot from
   * a hash of its address), so 2,000 engines are 100 scrapes every 50 ms rather than one burst of 2,000 a second
   * that would delay everything else the process does (watch events, KV writes) behind it.
   */
  start(): void {
    if (this.#timer || this.#closed) return;
    let slot = 0;
    this.#timer = setInterval(() => {
      this.#tick(slot);
      slot = (slot + 1) % this.#bySlot.length;
    }, this.#slotMs);
    this.#timer.unref?.();
    if (this.#opts.holdUntilStart === true) for (const t of this.#targets.values()) if (t.mine) this.#enqueue(t);
  }

  /** Adds a reference to `ip:port`; a new address is scraped at once. */
  acquire(id: string, baseUrl: string, engine: InferenceEngine): void {
    const t = this.#targets.get(id);
    if (t) {
      t.refs += 1;
      t.engine = engine;
      return;
    }
    const metricsUrl = `${baseUrl}/metrics`;
    const target: Target = {
      id,
      baseUrl,
      metricsUrl,
      engine,
      // A hash of the address: a stable, well-spread phase per target.
      phase: hashString32(id),
      refs: 1,
      view: { metrics: NEVER_SCRAPED, models: [] },
      ttftTotals: undefined,
      tpotTotals: undefined,
      modelsAt: 0,
      infoAt: 0,
      infoPath: SERVER_INFO_PATHS[0],
      bootstrapUrl: undefined,
      bootstrapAt: 0,
      queued: false,
      removed: false,
      mine: true,
      started: 0,
      refused: undefined,
      confirmedAt: 0,
      // The page is read where it lies (its memory serves the next scrape): only the numbers leave.
      readLoad: (status, page) => {
        ensureOk(metricsUrl, status);
        const read = readEngineLoad(target.engine, page);
        if (!read.ok) throw new ScrapeError('parse', read.error);
        return read.load;
      },
      onLoad: (err, load) => this.#settle(target, this.#recordLoad(target, load, err)),
    };
    this.#targets.set(id, target);
    this.#bySlot[target.phase % this.#bySlot.length]?.add(target);
    target.mine = this.#owned(id);
    if (target.mine) this.#enqueue(target);
  }

  /** Drops a reference; the address is forgotten when no placement uses it. */
  release(id: string): void {
    const t = this.#targets.get(id);
    if (!t) return;
    t.refs -= 1;
    if (t.refs <= 0) {
      t.removed = true;
      this.#targets.delete(id);
      this.#bySlot[t.phase % this.#bySlot.length]?.delete(t);
      this.#opts.http.forget(t.baseUrl);
    }
  }

  /**
   * Asks `url` (a vLLM Mooncake prefill's `http://ip:port/query`) with this target's scrapes: at the next one, then
   * every server-info interval and whenever the engine answers again after failing scrapes; undefined stops asking.
   * A new URL forgets the last answer.
   */
  setBootstrapQuery(id: string, url: string | undefined): void {
    const t = this.#targets.get(id);
    if (t === undefined || t.bootstrapUrl === url) return;
    t.bootstrapUrl = url;
    t.bootstrapAt = 0;
    if (t.view.mooncake !== undefined) {
      const { mooncake: _forgotten, ...rest } = t.view;
      t.view = rest;
      this.#opts.onUpdate(t.id);
    }
    // Known already and scraped: asked now rather than a scrape interval later (its record waits for the answer).
    if (t.mine && t.view.metrics.scrapedAt > 0) this.#enqueue(t);
  }

  /** Reads the engine's `/server_info` again at its next scrape (its side ports may have changed). */
  refreshServerInfo(id: string): void {
    const t = this.#targets.get(id);
    if (t) t.infoAt = 0;
  }

  /**
   * The shards changed: targets that became this replica's are scraped at once; the connections to those that
   * went to another replica are closed (10,000 engines are 10,000 descriptors, here and at the engines).
   */
  rescope(): void {
    for (const t of this.#targets.values()) if (this.#reown(t)) this.#enqueue(t);
  }

  /** Targets this replica scrapes (its shard). */
  get ownedSize(): number {
    let n = 0;
    for (const t of this.#targets.values()) if (t.mine) n += 1;
    return n;
  }

  /**
   * Looks again whether `t` is in this replica's shard; the connection to an engine that went to another replica
   * is closed. True when it just became this replica's.
   */
  #reown(t: Target): boolean {
    const was = t.mine;
    t.mine = this.#owned(t.id);
    if (was && !t.mine) {
      this.#opts.http.forget(t.baseUrl);
      t.confirmedAt = 0;
    }
    return t.mine && !was;
  }

  #owned(id: string): boolean {
    return this.#opts.owned === undefined || this.#opts.owned(id);
  }

  view(id: string): TargetView | undefined {
    return this.#targets.get(id)?.view;
  }

  get size(): number {
    return this.#targets.size;
  }

  /**
   * The time every engine this replica scrapes was last confirmed at: the oldest last successful scrape among its
   * targets that are not failing (failing ones are marked stale in their records, which says more). Undefined while
   * one of them has not been scraped yet since it became this replica's (just added or handed over): its record
   * may hold what another replica or an earlier process saw. No targets: now.
   */
  confirmedSince(): number | undefined {
    let oldest = this.#now();
    for (const t of this.#targets.values()) {
      if (!t.mine || t.view.metrics.stale) continue;
      if (t.confirmedAt === 0) return undefined;
      if (t.confirmedAt < oldest) oldest = t.confirmedAt;
    }
    return oldest;
  }

  staleCount(): number {
    let n = 0;
    for (const t of this.#targets.values()) if (t.mine && t.view.metrics.stale) n += 1;
    return n;
  }

  /** Resolves when no scrape is running or queued (tests and shutdown). */
  idle(): Promise<void> {
    if (this.#active === 0 && this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.add(resolve));
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#queue.length = 0;
    await this.idle();
  }

  /**
   * Looks again whether one target is this replica's: its placements changed (one was added or removed, or its
   * mode or engine changed). Ownership is otherwise only re-read by `rescope()`: a tick trusts it, since asking the
   * shard ring for each of 10,000 targets every second cost more than the scrapes' page scans.
   */
  reown(id: string): void {
    const t = this.#targets.get(id);
    if (t !== undefined && this.#reown(t)) this.#enqueue(t);
  }

  #tick(slot: number): void {
    for (const t of this.#bySlot[slot] ?? []) if (t.mine) this.#enqueue(t);
  }

  #enqueue(t: Target): void {
    // A target still queued or in flight from the previous tick is not queued twice.
    if (t.queued || this.#closed || (this.#opts.holdUntilStart === true && this.#timer === undefined)) return;
    t.queued = true;
    this.#queue.push(t);
    this.#pump();
  }

  #pump(): void {
    while (this.#active < this.#opts.concurrency && this.#queue.length > 0) {
      const t = this.#queue.shift() as Target;
      // Queued before the shards changed and no longer this replica's: left to its owner.
      if (t.removed || !t.mine) {
        t.queued = false;
        continue;
      }
      this.#active += 1;
      t.started = this.#now();
      const modelsDue =
        (t.modelsAt === 0 || t.started - t.modelsAt >= this.#opts.modelsIntervalMs) && !this.#refusedWaits(t, '/v1/models', t.started);
      // Most scrapes read the metrics page only: callbacks made once per target, no promise per scrape.
      if (modelsDue) this.#settle(t, this.#scrapeWithModels(t));
      else this.#opts.http.request(t.metricsUrl, t.readLoad, t.onLoad);
    }
  }

  /** The scrape of `t` is over once `pending` (the server-info read it started, if any) is. */
  #settle(t: Target, pending: Promise<void> | undefined): void {
    if (pending === undefined) this.#scraped(t);
    else void pending.finally(() => this.#scraped(t));
  }

  #scraped(t: Target): void {
    t.queued = false;
    // It moved to another replica while being scraped: its connection goes too.
    if (!t.mine) this.#opts.http.forget(t.baseUrl);
    this.#active -= 1;
    this.#pump();
    if (this.#active === 0 && this.#queue.length === 0) {
      for (const resolve of this.#idle) resolve();
      this.#idle.clear();
    }
  }

  /**
   * A metrics-only scrape's outcome. What taking it throws becomes a rejection, as in the promise path with
   * models: the scrape ends either way and the process guard logs and counts it (an error escaping here is a bug).
   */
  #recordLoad(t: Target, load: EngineLoad | undefined, failure: unknown): Promise<void> | undefined {
    try {
      return this.#record(t, load, failure, undefined);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The metrics page and `/v1/models` at once (every `modelsIntervalMs`). */
  async #scrapeWithModels(t: Target): Promise<void> {
    const auth = this.#opts.engineAuth?.(t.id);
    const [metricsResult, modelsResult] = await Promise.allSettled([
      this.#opts.http.read(t.metricsUrl, (page) => t.readLoad(200, page)),
      this.#opts.http.getText(`${t.baseUrl}/v1/models`, auth?.header).then(parseModelIds),
    ]);
    this.#noteApiRead(t, '/v1/models', modelsResult.status === 'rejected' ? modelsResult.reason : undefined, auth);
    await this.#record(
      t,
      metricsResult.status === 'fulfilled' ? metricsResult.value : undefined,
      metricsResult.status === 'rejected' ? metricsResult.reason : undefined,
      modelsResult,
    );
  }

  /**
   * Takes a scrape's outcome into the target's view and reports it when it changed. Returns the read of SGLang's
   * server info when one is due (after which the view is reported), else undefined: the scrape is over.
   */
  #record(
    t: Target,
    load: EngineLoad | undefined,
    failure: unknown,
    modelsResult: PromiseSettledResult<string[]> | undefined,
  ): Promise<void> | undefined {
    if (t.removed) return undefined;
    const started = t.started;
    const prev = t.view;
    // The first good scrape since this replica owns the target is reported even when its numbers match the view
    // kept from an earlier ownership: the record must be written again under this replica's name.
    const firstOwnScrape = t.confirmedAt === 0;
    let metrics: TargetView['metrics'];
    let models = prev.models;
    if (load !== undefined) {
      const m: MetricsSnapshot = {
        running: load.running,
        waiting: load.waiting,
        kvCacheUsage: load.kvCacheUsage,
        scrapedAt: this.#now(),
        stale: false,
      };
      const ttftMs = intervalMeanMs(t.ttftTotals, load.ttft, prev.metrics.ttftMs);
      const tpotMs = intervalMeanMs(t.tpotTotals, load.tpot, prev.metrics.tpotMs);
      if (load.dpRanks !== undefined) m.dpRanks = load.dpRanks;
      if (ttftMs !== undefined) m.ttftMs = ttftMs;
      if (tpotMs !== undefined) m.tpotMs = tpotMs;
      // The means only move when the engine observed something new; their age lets the scheduler forget them.
      const observed = hasNewObservations(t.ttftTotals, load.ttft) || hasNewObservations(t.tpotTotals, load.tpot);
      const latencyAt = observed ? m.scrapedAt : prev.metrics.latencyAt;
      if (latencyAt !== undefined && (ttftMs !== undefined || tpotMs !== undefined)) m.latencyAt = latencyAt;
      t.ttftTotals = latestTotals(t.ttftTotals, load.ttft);
      t.tpotTotals = latestTotals(t.tpotTotals, load.tpot);
      metrics = m;
      t.confirmedAt = m.scrapedAt;
      this.#metricsOk?.inc();
      this.#opts.metrics?.scrapeDuration.observe((this.#now() - started) / 1000);
      if (prev.metrics.stale) {
        this.#opts.logger.info({ target: t.id }, 'scrapes succeed again');
        // It may have restarted with other adapters, or another API key: its model list is read again with the next
        // scrape, and its server info with this one, even while refused reads wait.
        if (modelsResult === undefined) t.modelsAt = 0;
        if (t.refused !== undefined) for (const refused of t.refused.values()) refused.retryAt = 0;
      }
    } else {
      const err = failure as Error;
      const reason = err instanceof ScrapeError ? err.reason : 'parse';
      this.#opts.metrics?.scrapes.inc({ what: 'metrics', result: 'error' });
      this.#opts.metrics?.scrapeErrors.inc({ what: 'metrics', reason });
      if (!prev.metrics.stale || prev.metrics.lastError !== err.message)
        this.#opts.logger.warn({ target: t.id, reason, err: err.message }, 'scrape failed; endpoint marked stale');
      metrics = { ...prev.metrics, stale: true, lastError: err.message };
    }
    if (modelsResult !== undefined) {
      if (modelsResult.status === 'fulfilled') {
        t.modelsAt = this.#now();
        models = sameList(prev.models, modelsResult.value) ? prev.models : modelsResult.value;
        this.#opts.metrics?.scrapes.inc({ what: 'models', result: 'ok' });
      } else if (modelsResult.status === 'rejected') {
        const err = modelsResult.reason as Error;
        this.#opts.metrics?.scrapes.inc({ what: 'models', result: 'error' });
        this.#opts.metrics?.scrapeErrors.inc({ what: 'models', reason: err instanceof ScrapeError ? err.reason : 'parse' });
      }
    }
    // An engine that answers again after failing scrapes may have restarted with other settings (and engine ids).
    const recovered = prev.metrics.stale && !metrics.stale;
    const infoDue = t.engine === 'SGLang' && !metrics.stale && (recovered || this.#infoDue(t));
    const probeDue = t.bootstrapUrl !== undefined && !metrics.stale && (recovered || this.#probeDue(t));
    if (infoDue || probeDue) {
      return Promise.all([infoDue ? this.#fetchServerInfo(t) : prev.serverInfo, probeDue ? this.#probeBootstrap(t) : prev.mooncake]).then(
        ([serverInfo, mooncake]) => {
          if (!t.removed) this.#report(t, prev, metrics, models, serverInfo, mooncake, firstOwnScrape);
        },
      );
    }
    this.#report(t, prev, metrics, models, prev.serverInfo, prev.mooncake, firstOwnScrape);
    return undefined;
  }

  #probeDue(t: Target): boolean {
    return t.bootstrapAt === 0 || this.#now() - t.bootstrapAt >= (this.#opts.serverInfoIntervalMs ?? 30_000);
  }

  /** The bootstrap probe; its verdict is logged when it changes (a prefill that restarted as another engine too). */
  async #probeBootstrap(t: Target): Promise<MooncakeProbe> {
    const url = t.bootstrapUrl as string;
    const probe = await probeMooncakeBootstrap(this.#opts.http, url);
    t.bootstrapAt = this.#now();
    this.#opts.metrics?.mooncakeProbes.inc({ flow: probe.flow });
    if (!sameProbe(t.view.mooncake, probe)) {
      this.#opts.logger.info(
        { target: t.id, flow: probe.flow, engineIds: probe.engineIds, detail: probe.detail },
        probe.flow === 'concurrent'
          ? "Mooncake prefill runs upstream vLLM's connector"
          : "Mooncake prefill answers no bootstrap /query (vllm-ascend's connector)",
      );
    }
    return probe;
  }

  #report(
    t: Target,
    prev: TargetView,
    metrics: MetricsSnapshot,
    models: readonly string[],
    serverInfo: SglangServerInfo | undefined,
    probe: MooncakeProbe | undefined,
    firstOwnScrape: boolean,
  ): void {
    const info = serverInfo && sameServerInfo(prev.serverInfo, serverInfo) ? prev.serverInfo : serverInfo;
    const mooncake = sameProbe(prev.mooncake, probe) ? prev.mooncake : probe;
    // A first successful scrape is news even when it finds the numbers a never-scraped view starts with.
    const unchanged =
      !(firstOwnScrape && !metrics.stale) &&
      models === prev.models &&
      info === prev.serverInfo &&
      mooncake === prev.mooncake &&
      sameMetrics(prev.metrics, metrics) &&
      (prev.metrics.scrapedAt !== 0 || metrics.scrapedAt === 0) &&
      (metrics.stale || metrics.scrapedAt - prev.metrics.scrapedAt < (this.#opts.reportEveryMs ?? Number.POSITIVE_INFINITY));
    if (unchanged) return;
    t.view = { metrics, models, ...(info ? { serverInfo: info } : {}), ...(mooncake ? { mooncake } : {}) };
    this.#opts.onUpdate(t.id);
  }

  /**
   * Takes the outcome of an API read for the refusal backoff and log. A read the engine refused (401/403: it checks
   * an API key, and the watcher sent none or another one) waits before it goes again: the route's own interval after
   * the first refusal, doubling with each further one of the same credential, at most 5 minutes (or the interval,
   * when longer); `/metrics` goes on every scrape meanwhile. It goes with the next scrape, wait or not, when what the
   * watcher would send changes (see `#refusedWaits`) or the engine answers again after failing scrapes. Logged when it starts, when
   * what the watcher sends changes, and again every `refusedLogEveryMs` while it goes on; and once when the engine
   * accepts that read again, which ends the backoff. Counted as `scrape_errors_total{reason="unauthorized"}`; the
   * last models and server info read stay in the records meanwhile. The value sent is never logged.
   */
  #noteApiRead(t: Target, path: ApiPath, failure: unknown, auth: EngineAuth | undefined): void {
    const status = failure instanceof ScrapeError ? failure.status : undefined;
    const was = t.refused?.get(path);
    const sent = auth?.from ?? 'none';
    if (status !== 401 && status !== 403) {
      if (failure === undefined && was !== undefined) {
        t.refused?.delete(path);
        this.#opts.logger.info({ target: t.id, path, sent }, "the engine accepts the pod-watcher's read again");
      }
      return;
    }
    const now = this.#now();
    const refusals = was !== undefined && was.from === sent && was.header === auth?.header ? was.refusals + 1 : 1;
    const waitMs = this.#refusedWaitMs(path, refusals);
    const logged = `${status} ${sent}`;
    const logDue = was === undefined || was.logged !== logged || now - was.loggedAt >= (this.#opts.refusedLogEveryMs ?? 300_000);
    const loggedAt = was === undefined || logDue ? now : was.loggedAt;
    (t.refused ??= new Map()).set(path, { logged, loggedAt, from: sent, header: auth?.header, refusals, retryAt: now + waitMs });
    if (!logDue) return;
    this.#opts.logger.warn(
      { target: t.id, path, status, sent, retryInMs: waitMs },
      `the engine refused the pod-watcher's read (HTTP ${status}): it checks an API key, and the watcher sent ` +
        `${auth?.header === undefined ? 'none' : 'another one'} (see sent; set the ModelServer's engineAuth). ` +
        'The last models and server info read are kept; the read is tried again after a growing delay (retryInMs), ' +
        'or at once when the credential changes',
    );
  }

  /** How long a read of `path` waits after its `refusals`-th refusal in a row of the same credential. */
  #refusedWaitMs(path: ApiPath, refusals: number): number {
    const intervalMs = path === '/v1/models' ? this.#opts.modelsIntervalMs : (this.#opts.serverInfoIntervalMs ?? 30_000);
    return Math.min(intervalMs * 2 ** (refusals - 1), Math.max(intervalMs, REFUSED_BACKOFF_CAP_MS));
  }

  /**
   * Whether the read of `path` waits after refusals at `now`: its delay has not passed, and the watcher would send
   * what was refused. Would it send something else (a Secret added or rotated, another engineAuth), the read goes
   * now. The credential is only looked up for reads that wait.
   */
  #refusedWaits(t: Target, path: ApiPath, now: number): boolean {
    const refused = t.refused?.get(path);
    if (refused === undefined || now >= refused.retryAt) return false;
    const auth = this.#opts.engineAuth?.(t.id);
    if ((auth?.from ?? 'none') === refused.from && auth?.header === refused.header) return true;
    refused.retryAt = 0;
    return false;
  }

  #infoDue(t: Target): boolean {
    const now = this.#now();
    return (t.infoAt === 0 || now - t.infoAt >= (this.#opts.serverInfoIntervalMs ?? 30_000)) && !this.#refusedWaits(t, '/server_info', now);
  }

  /** `/server_info`, falling back to `/get_server_info` on a 404 (remembered per engine); the last value on failure. */
  async #fetchServerInfo(t: Target): Promise<SglangServerInfo | undefined> {
    const paths = t.infoPath === SERVER_INFO_PATHS[0] ? SERVER_INFO_PATHS : ([t.infoPath] as const);
    const auth = this.#opts.engineAuth?.(t.id);
    for (const path of paths) {
      try {
        const info = parseServerInfo(await this.#opts.http.getText(`${t.baseUrl}${path}`, auth?.header));
        t.infoAt = this.#now();
        t.infoPath = path;
        this.#opts.metrics?.scrapes.inc({ what: 'server_info', result: 'ok' });
        this.#noteApiRead(t, '/server_info', undefined, auth);
        return info;
      } catch (err) {
        if (err instanceof ScrapeError && err.status === 404 && path === SERVER_INFO_PATHS[0]) continue;
        this.#noteApiRead(t, '/server_info', err, auth);
        this.#opts.metrics?.scrapes.inc({ what: 'server_info', result: 'error' });
        this.#opts.metrics?.scrapeErrors.inc({ what: 'server_info', reason: err instanceof ScrapeError ? err.reason : 'parse' });
        break;
      }
    }
    return t.view.serverInfo;
  }
}

/**
 * The totals to keep: the new ones, unless they equal the kept ones. Kept objects live a scrape interval, long
 * enough for V8 to move them to the old generation; replacing equal ones every scrape made old-space garbage.
 */
function latestTotals(kept: HistogramTotals | undefined, read: HistogramTotals | undefined): HistogramTotals | undefined {
  if (read === undefined) return kept;
  return kept !== undefined && kept.sum === read.sum && kept.count === read.count ? kept : read;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
