import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { Logger } from '@triad/runtime';
import {
  defaultSchedulerConfig,
  loadSchedulerConfig,
  type LoadedSchedulerConfig,
  type PluginRegistry,
  type Scheduler,
} from '@triad/scheduling';
import type { SchedulerMetrics } from '../metrics';

export type ConfigOrigin = 'kv' | 'file' | 'default';

/** Which config is running, for tests, logs and debugging. */
export interface ActiveConfig {
  readonly origin: ConfigOrigin;
  readonly fingerprint: string;
  /** Bumped on every switch. */
  readonly version: number;
}

/**
 * Chooses and hot-reloads the scheduler config. Precedence: the KV key (an operator's live override), else the
 * `--config` file, else the defaults. Every candidate goes through the two-phase loader; an invalid one is
 * logged with its reasons, counted, and ignored, so the running config stays (keep-last-good).
 */
export class ConfigSource {
  readonly #scheduler: Scheduler;
  readonly #registry: PluginRegistry;
  readonly #logger: Logger;
  readonly #metrics: SchedulerMetrics;
  #file: LoadedSchedulerConfig | undefined;
  #kv: LoadedSchedulerConfig | undefined;
  #active: ActiveConfig;

  constructor(opts: { scheduler: Scheduler; registry: PluginRegistry; logger: Logger; metrics: SchedulerMetrics }) {
    this.#scheduler = opts.scheduler;
    this.#registry = opts.registry;
    this.#logger = opts.logger;
    this.#metrics = opts.metrics;
    this.#active = { origin: 'default', fingerprint: opts.scheduler.config.fingerprint, version: 0 };
  }

  get active(): ActiveConfig {
    return this.#active;
  }

  /** Loads the `--config` file at start; an invalid file is fatal here (there is nothing good to keep yet). */
  loadInitialFile(path: string): void {
    const result = this.#load(readFileSync(path, 'utf8'));
    if (!result.ok) throw new Error(`invalid scheduler config ${path}:\n  ${result.reasons.join('\n  ')}`);
    this.#file = result.loaded;
    this.#apply();
  }

  /** A new text of the config file. */
  fileChanged(text: string): void {
    const result = this.#load(text);
    if (!result.ok) return this.#rejected('file', result.reasons);
    this.#file = result.loaded;
    this.#apply('file');
  }

  /** A new KV value (undefined = key deleted: fall back to the file or the defaults). */
  kvChanged(text: string | undefined): void {
    if (text === undefined) {
      if (!this.#kv) return;
      this.#kv = undefined;
      this.#apply('kv');
      return;
    }
    const result = this.#load(unwrapKvText(text));
    if (!result.ok) return this.#rejected('kv', result.reasons);
    this.#kv = result.loaded;
    this.#apply('kv');
  }

  #load(input: unknown): ReturnType<typeof loadSchedulerConfig> {
    return loadSchedulerConfig(input, { registry: this.#registry, previous: this.#scheduler.config });
  }

  #apply(source?: 'file' | 'kv'): void {
    const [origin, next] = this.#kv
      ? ['kv' as const, this.#kv]
      : this.#file
        ? ['file' as const, this.#file]
        : ['default' as const, this.#defaults()];
    if (next.fingerprint === this.#active.fingerprint && origin === this.#active.origin) {
      if (source) this.#metrics.configReloads.inc({ source, result: 'unchanged' });
      return;
    }
    this.#scheduler.setConfig(next);
    this.#active = { origin, fingerprint: next.fingerprint, version: this.#active.version + 1 };
    if (source) this.#metrics.configReloads.inc({ source, result: 'applied' });
    this.#logger.info({ origin, config: next.config }, 'scheduler config applied (effective, defaults filled in)');
    if (next.warnings.length > 0)
      this.#logger.warn({ origin, warnings: next.warnings }, 'scheduler config arguments Triad does not know were ignored');
  }

  #rejected(source: 'file' | 'kv', reasons: string[]): void {
    this.#metrics.configReloads.inc({ source, result: 'rejected' });
    this.#logger.error({ source, reasons, running: this.#active.origin }, 'invalid scheduler config rejected; keeping the running one');
  }

  #defaults(): LoadedSchedulerConfig {
    const result = loadSchedulerConfig(defaultSchedulerConfig(), { registry: this.#registry, previous: this.#scheduler.config });
    if (!result.ok) throw new Error(`default scheduler config does not load: ${result.reasons.join('; ')}`);
    return result.loaded;
  }
}

/** A KV value may be YAML/JSON config text, or a JSON string holding YAML text (put through a JSON client). */
function unwrapKvText(text: string): unknown {
  try {
    const parsed: unknown = parseYaml(text);
    return typeof parsed === 'string' ? parsed : (parsed ?? {});
  } catch {
    return text; // let the loader report the YAML error with its reasons
  }
}
