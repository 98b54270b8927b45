import { readFileSync } from 'node:fs';
import type { DispatchEvent } from '@triad/bus';
import { startAffinityFeed, startDispatchFeed, watchSchedulerConfig, type Bus } from '@triad/bus/client';
import { watchFile, type Logger } from '@triad/runtime';
import {
  SchedulerReplica,
  kvHashOptionsOf,
  prefixHashOptionsOf,
  type LoadedSchedulerConfig,
  type OutlierTable,
  type PrefixHashOptions,
} from '@triad/scheduling';
import { afterLegWrites } from '@triad/connectors';
import { startKvIndexFeed } from '@triad/kv-events';
import { KvBlockHashing, type KvHashObserver } from './kv-block-hashes';
import { PendingLegs } from './pending-legs';
import { TokenizerEndpoints } from './tokenizer-endpoints';
import type { KvView } from '../state/kv-view';

interface Stoppable {
  stop(): void;
}

/**
 * How long after a decision of its own the fallback applies this gateway's dispatch events as they come: its
 * decisions reserve legs (up to 30 s for a decode pod) that the legs' start events release, so until they have
 * expired the tracker must see every start in order.
 */
const EAGER_AFTER_DECISION_MS = 60_000;

/**
 * At the end of the turn, once the legs dispatched so far are written (see `afterLegWrites`): the decision that
 * taught a record is followed by its encode leg in the same turn.
 */
function flushAfterLegWrites(send: () => void): void {
  setImmediate(afterLegWrites, send);
}

/**
 * The gateway's own scheduler replica (`--scheduling in-process`, and the fallback when the scheduler service does
 * not answer): libs/scheduling's SchedulerReplica over the gateway's KV view, fed this gateway's dispatch events
 * for in-flight counts, on the outlier state the gateway feeds, and following the scheduler config as the
 * scheduler service does (KV > file > defaults, both watched), which also fixes the prompt hashing block size.
 */
export class LocalSchedulingFallback {
  readonly local: SchedulerReplica;
  /** Engine block keys for precise-prefix-cache, following the same config. */
  readonly kvHashing: KvBlockHashing;
  readonly #gatewayId: string;
  readonly #logger: Logger;
  #hashOptions: PrefixHashOptions;
  readonly #stops: Stoppable[] = [];
  /** This gateway's legs not yet counted (scheduler service mode); applied before the fallback decides. */
  readonly #pending = new PendingLegs();
  /** Until when dispatch events go to the tracker as they come (always with in-process scheduling). */
  #eagerUntil = 0;

  /**
   * `outliers`: the gateway's outlier state, fed from the outliers bucket (its detector writes there too);
   * `kvKeys`: told how block keys were made (metrics).
   */
  constructor(kv: KvView, gatewayId: string, logger: Logger, options: { outliers?: OutlierTable; kvKeys?: KvHashObserver } = {}) {
    this.#gatewayId = gatewayId;
    this.#logger = logger;
    const tokenizerEndpoints = new TokenizerEndpoints();
    this.kvHashing = new KvBlockHashing(logger, tokenizerEndpoints, options.kvKeys);
    this.local = new SchedulerReplica({
      instanceId: `${gatewayId}/local`,
      outliers: options.outliers,
      log: logger,
      onApplied: (config) => this.#follow(config),
    });
    this.#hashOptions = prefixHashOptionsOf(this.local.scheduler.config);
    this.kvHashing.configure(kvHashOptionsOf(this.local.scheduler.config));
    kv.addListener({
      endpoint: (c) => {
        this.local.applyEndpoint(c);
        tokenizerEndpoints.apply(c);
      },
      modelServer: (c) => this.local.applyModelServer(c),
      freshness: (c) => this.local.applyFreshness(c),
    });
  }

  #follow(config: LoadedSchedulerConfig): void {
    this.#hashOptions = prefixHashOptionsOf(config);
    this.kvHashing.configure(kvHashOptionsOf(config));
  }

  /** Runs with the scheduler's config file (watched) whenever KV holds no config; throws when it is invalid. */
  useConfigFile(path: string): void {
    this.local.config.initialFile(readFileSync(path, 'utf8'), path);
    const watch = watchFile(
      path,
      (text) => this.local.config.fileChanged(text),
      (err) => this.#logger.warn({ err }, 'scheduler config file watch failed'),
    );
    this.#stops.push({ stop: () => watch.close() });
  }

  get hashOptions(): PrefixHashOptions {
    return this.#hashOptions;
  }

  schedule: SchedulerReplica['schedule'] = (request, now) => {
    const at = now ?? Date.now();
    if (this.#pending.size > 0) this.#pending.drain(this.#apply);
    if (this.#eagerUntil !== Number.POSITIVE_INFINITY) this.#eagerUntil = at + EAGER_AFTER_DECISION_MS;
    return this.local.schedule(request, now);
  };

  /**
   * Counts this gateway's own legs (the fallback sees only its own gateway's load). With the scheduler service
   * deciding, the counts are read only when the fallback decides: the legs are held (`PendingLegs`, cheaper than
   * the tracker's per-leg bookkeeping, and a finished request's legs are dropped) and applied then, to the same
   * counts and prefill backlog; measured latency is applied at once, as its moving average depends on the order.
   */
  dispatched(event: DispatchEvent): void {
    if (this.#eagerUntil > Date.now()) {
      this.#apply(event);
      return;
    }
    // A finish whose start was applied as it came (before the holding began) is applied the same way.
    if (!this.#pending.add(event)) this.#apply(event);
    else this.local.tracker.observeLatency(event);
  }

  readonly #apply = (event: DispatchEvent): void => this.local.applyDispatchEvent(this.#gatewayId, event);

  /**
   * In-process scheduling: also counts the legs other gateway replicas have in flight, from their dispatch
   * batches (as every scheduler replica does), so the decisions see the cluster's load and not this gateway's
   * alone. A replica whose snapshots stop expires from the counts.
   */
  followPeers(bus: Bus): void {
    // Every request is decided here: the counts are read per request.
    this.#eagerUntil = Number.POSITIVE_INFINITY;
    this.#stops.push(startDispatchFeed(bus, this.local.tracker, { ignoreGateway: this.#gatewayId }));
    // The engines' KV blocks too, so precise-prefix-cache scores here as it does in the scheduler service.
    void startKvIndexFeed(bus, this.local.kvIndex).then(
      (feed) => this.#stops.push(feed),
      (err: unknown) => this.#logger.warn({ err: (err as Error).message }, 'cannot follow the KV index; precise prefix routing falls back'),
    );
  }

  /**
   * Shares affinity with the scheduler replicas and the other gateways over `triad.v1.affinity`: this fallback
   * applies what their decisions taught (so a reply over budget does not cost the request its prefix affinity),
   * once the legs of the turn they arrived in are written, and publishes what its own decisions teach, when `flush`
   * sends them (default: at the end of the turn, after its leg writes; the gateway passes its dispatch publisher's
   * flush, so they share its window and its write).
   */
  followAffinity(bus: Bus, flush: (send: () => void) => void = flushAfterLegWrites): void {
    const scheduler = this.local.scheduler;
    // The others' records are applied after the turn's legs are written: they often come in the read that brings a
    // scheduling reply, right behind it, and decoding them first held up the request the reply answered.
    const feed = startAffinityFeed(bus, scheduler, { origin: `${this.#gatewayId}/local`, flush, receive: flushAfterLegWrites });
    scheduler.onLearned = (record) => feed.publish(record);
    this.#stops.push({
      stop: () => {
        scheduler.onLearned = undefined;
        feed.stop();
      },
    });
  }

  /** Follows `triad_v1_config/scheduler`; an invalid document is logged and the running config kept. */
  async followConfig(bus: Bus): Promise<void> {
    try {
      const watch = await watchSchedulerConfig(bus, (text) => this.local.config.kvChanged(text));
      this.#stops.push(watch);
      if (watch.initial !== undefined) this.local.config.kvChanged(watch.initial);
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'cannot follow the scheduler config; local fallback keeps its defaults');
    }
  }

  stop(): void {
    for (const s of this.#stops.splice(0)) s.stop();
    this.local.close();
  }
}
