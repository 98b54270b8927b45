import { Buckets, SCHEMA_VERSION, scrapeFreshnessKey, type ScrapeFreshnessRecord } from '@triad/bus';
import type { Logger } from '@triad/runtime';
import type { WatcherMetrics } from '../ops/metrics';

/** The slice of the typed scrape-freshness bucket written through. */
export interface FreshnessKv {
  put(key: string, value: ScrapeFreshnessRecord): Promise<number>;
}

export interface ScrapeFreshnessOptions {
  /** Opens (creating when missing) the scrape-freshness bucket; called again after a failed write. */
  readonly open: () => Promise<FreshnessKv>;
  readonly identity: string;
  readonly periodMs: number;
  /**
   * Until when every endpoint record this replica wrote is known current: its engines' last confirmation, capped by
   * its oldest write KV has not acknowledged yet. Undefined: nothing to vouch for now (an engine of its share not
   * scraped yet, or its records not published yet); the last word then stands and ages.
   */
  readonly confirmedAt: () => number | undefined;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
}

const bucket = Buckets.scrapeFreshness;

/**
 * Publishes this replica's scrape freshness every `periodMs`: one KV write per replica says how current all the
 * endpoint records it wrote are, so an engine whose numbers did not change is not rewritten to say so (10,000 idle
 * engines were 2,000 record writes a second, each read by every scheduler and gateway). One write at a time; a
 * failed one is logged once and retried at the next period with the bucket reopened.
 */
export class ScrapeFreshnessPublisher {
  readonly #opts: ScrapeFreshnessOptions;
  readonly #key: string;
  #kv: FreshnessKv | undefined;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #failing = false;
  /** Last value KV acknowledged (the same confirmation is not written twice). */
  #published = -1;

  constructor(options: ScrapeFreshnessOptions) {
    this.#opts = options;
    this.#key = scrapeFreshnessKey(options.identity);
  }

  /** The confirmation time KV last acknowledged from this replica (undefined: none yet). */
  get confirmedAt(): number | undefined {
    return this.#published < 0 ? undefined : this.#published;
  }

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.publish(), this.#opts.periodMs);
    this.#timer.unref?.();
  }

  /** Writes the current confirmation now (unless a write is in flight or there is nothing new); resolves when done. */
  publish(): Promise<void> {
    if (this.#writing) return this.#writing;
    const confirmed = this.#opts.confirmedAt();
    if (confirmed === undefined) return Promise.resolve();
    const confirmedAt = Math.floor(confirmed);
    if (confirmedAt <= this.#published) return Promise.resolve();
    this.#writing = this.#write(confirmedAt).finally(() => {
      this.#writing = undefined;
    });
    return this.#writing;
  }

  async #write(confirmedAt: number): Promise<void> {
    const { metrics } = this.#opts;
    try {
      this.#kv ??= await this.#opts.open();
      await this.#kv.put(this.#key, { schemaVersion: SCHEMA_VERSION, replica: this.#opts.identity, confirmedAt });
      this.#published = confirmedAt;
      metrics?.kvWrites.inc({ bucket, op: 'put', result: 'ok' });
      if (this.#failing) this.#opts.logger.info({ bucket }, 'scrape freshness written again');
      this.#failing = false;
    } catch (err) {
      this.#kv = undefined;
      metrics?.kvWrites.inc({ bucket, op: 'put', result: 'error' });
      if (!this.#failing) this.#opts.logger.warn({ bucket, err: (err as Error).message }, 'scrape freshness not written; retrying');
      this.#failing = true;
    }
  }

  /** Stops publishing (the last word stays in KV and ages: readers stop trusting it after their stale bound). */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#writing;
  }
}
