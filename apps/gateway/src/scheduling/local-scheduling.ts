import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { Buckets, ConfigKeys, type DispatchEvent } from '@triad/bus';
import { startAffinityFeed, startDispatchFeed, type Bus, type KvWatchHandle } from '@triad/bus/client';
import type { Logger } from '@triad/runtime';
import {
  createLocalScheduling,
  defaultSchedulerConfig,
  kvHashOptionsOf,
  prefixHashOptionsOf,
  type LocalScheduling,
  type PrefixHashOptions,
} from '@triad/scheduling';
import { startKvIndexFeed } from '@triad/kv-events';
import { KvBlockHashing, type KvHashObserver } from './kv-block-hashes';
import { TokenizerEndpoints } from './tokenizer-endpoints';
import type { KvView } from '../state/kv-view';

/**
 * The gateway's fallback scheduler: libs/scheduling over the gateway's own KV view, fed this gateway's dispatch
 * events for in-flight counts, and following the operator's scheduler config in KV (which also fixes the
 * prompt hashing block size the scheduler service expects).
 */
export class LocalSchedulingFallback {
  readonly local: LocalScheduling;
  readonly #gatewayId: string;
  readonly #logger: Logger;
  #hashOptions: PrefixHashOptions;
  /** Engine block keys for precise-prefix-cache, following the same config. */
  readonly kvHashing: KvBlockHashing;
  #watch: KvWatchHandle | undefined;
  /** The scheduler config file's text (`--scheduler-config`), applied whenever KV holds no config. */
  #fileConfig: string | undefined;
  #peers: { stop(): void } | undefined;
  #kvFeed: { stop(): void } | undefined;
  #affinity: { stop(): void } | undefined;

  constructor(kv: KvView, gatewayId: string, logger: Logger, kvKeys?: KvHashObserver) {
    this.local = createLocalScheduling({ instanceId: `${gatewayId}/local` });
    this.#gatewayId = gatewayId;
    this.#logger = logger;
    this.#hashOptions = prefixHashOptionsOf(this.local.scheduler.config);
    const tokenizerEndpoints = new TokenizerEndpoints();
    this.kvHashing = new KvBlockHashing(logger, tokenizerEndpoints, kvKeys);
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

  /** Runs with the scheduler's config file until (and whenever not) overridden by KV; throws when it is invalid. */
  useConfigFile(path: string): void {
    const text = readFileSync(path, 'utf8');
    if (!this.#apply(text, `scheduler config ${path}`)) throw new Error(`invalid scheduler config ${path} (see the log)`);
    this.#fileConfig = text;
  }

  #apply(input: unknown, what: string): boolean {
    const result = this.local.reloadConfig(input);
    if (!result.ok) {
      this.#logger.warn({ reasons: result.reasons }, `${what} rejected by the local fallback`);
      return false;
    }
    if (result.config.warnings.length > 0)
      this.#logger.warn({ warnings: result.config.warnings }, `${what}: arguments Triad does not know were ignored`);
    this.#hashOptions = prefixHashOptionsOf(result.config);
    this.kvHashing.configure(kvHashOptionsOf(result.config));
    return true;
  }

  get hashOptions(): PrefixHashOptions {
    return this.#hashOptions;
  }

  schedule: LocalScheduling['schedule'] = (request, now) => this.local.schedule(request, now);

  /** Counts this gateway's own legs (the fallback sees only its own gateway's load). */
  dispatched(event: DispatchEvent): void {
    this.local.tracker.applyEvent(this.#gatewayId, event);
  }

  /**
   * In-process scheduling: also counts the legs other gateway replicas have in flight, from their dispatch
   * batches (as every scheduler replica does), so the decisions see the cluster's load and not this gateway's
   * alone. A replica whose snapshots stop expires from the counts.
   */
  followPeers(bus: Bus): void {
    this.#peers = startDispatchFeed(bus, this.local.tracker, { ignoreGateway: this.#gatewayId });
    // The engines' KV blocks too, so precise-prefix-cache scores here as it does in the scheduler service.
    void startKvIndexFeed(bus, this.local.kvIndex).then(
      (feed) => (this.#kvFeed = feed),
      (err: unknown) => this.#logger.warn({ err: (err as Error).message }, 'cannot follow the KV index; precise prefix routing falls back'),
    );
  }

  /**
   * Shares affinity with the scheduler replicas and the other gateways over `triad.v1.affinity`: this fallback
   * applies what their decisions taught (so a reply over budget does not cost the request its prefix affinity)
   * and publishes what its own decisions teach.
   */
  followAffinity(bus: Bus): void {
    const origin = `${this.#gatewayId}/local`;
    const feed = startAffinityFeed(bus, this.local.scheduler, { origin });
    this.local.scheduler.onLearned = (record) => feed.publish(record);
    this.#affinity = {
      stop: () => {
        this.local.scheduler.onLearned = undefined;
        feed.stop();
      },
    };
  }

  /** Follows `triad_v1_config/scheduler`; an invalid document is logged and the running config kept. */
  async followConfig(bus: Bus): Promise<void> {
    try {
      const kv = await bus.kv(Buckets.config, z.unknown(), { history: 5 });
      this.#watch = await kv.watch({
        key: ConfigKeys.scheduler,
        onChange: (c) => {
          if (c.op === 'PUT') {
            this.#apply(c.value, 'scheduler config in KV');
            return;
          }
          // A deleted (or purged) key falls back to the scheduler's config file when the gateway has it
          // (--scheduler-config), else to the built-in defaults, as the scheduler service falls back.
          if (this.#apply(this.#fileConfig ?? defaultSchedulerConfig(), 'scheduler config')) {
            this.#logger.info(`scheduler config key deleted; local fallback back on the ${this.#fileConfig ? 'config file' : 'defaults'}`);
          }
        },
      });
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'cannot follow the scheduler config; local fallback keeps its defaults');
    }
  }

  stop(): void {
    this.#watch?.stop();
    this.#peers?.stop();
    this.#kvFeed?.stop();
    this.#affinity?.stop();
  }
}
