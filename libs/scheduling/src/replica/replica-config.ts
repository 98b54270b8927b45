import { parse as parseYaml } from 'yaml';
import { defaultSchedulerConfig } from '../config/default-config';
import { loadSchedulerConfig, type LoadedSchedulerConfig } from '../config/load-config';
import type { PluginRegistry } from '../framework/registry';
import type { Scheduler } from '../scheduler';

/** Where the running config came from. */
type ConfigOrigin = 'kv' | 'file' | 'default';

/** Which config is running, for tests, logs and debugging. */
export interface ActiveConfig {
  readonly origin: ConfigOrigin;
  readonly fingerprint: string;
  /** Bumped on every switch. */
  readonly version: number;
}

/** What a reload of one source did (the scheduler's `triad_scheduler_config_reloads_total`). */
type ConfigReloadResult = 'applied' | 'unchanged' | 'rejected';

/** The log lines a config switch writes (a pino logger fits). */
interface ConfigLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface ReplicaConfigOptions {
  readonly scheduler: Scheduler;
  readonly registry: PluginRegistry;
  readonly log?: ConfigLog | undefined;
  /** Every reload of the file or the KV value, with what it did. */
  readonly onReload?: ((source: 'file' | 'kv', result: ConfigReloadResult) => void) | undefined;
  /** A config took effect (the gateway re-derives its prompt hashing from it). */
  readonly onApplied?: ((config: LoadedSchedulerConfig, origin: ConfigOrigin) => void) | undefined;
}

/**
 * Chooses and hot-reloads a replica's scheduler config. Precedence: the KV key (an operator's live override), else
 * the config file, else the defaults. Every candidate goes through the two-phase loader; an invalid one is logged
 * with its reasons, counted, and ignored, so the running config stays (keep-last-good). It is fed texts: reading
 * the file and watching KV are the caller's.
 */
export class ReplicaConfig {
  readonly #o: ReplicaConfigOptions;
  #file: LoadedSchedulerConfig | undefined;
  #kv: LoadedSchedulerConfig | undefined;
  #active: ActiveConfig;

  constructor(options: ReplicaConfigOptions) {
    this.#o = options;
    this.#active = { origin: 'default', fingerprint: options.scheduler.config.fingerprint, version: 0 };
  }

  get active(): ActiveConfig {
    return this.#active;
  }

  /** The config file at start; an invalid one throws (there is nothing good to keep yet). */
  initialFile(text: string, path: string): void {
    const result = this.#load(text);
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
    return loadSchedulerConfig(input, { registry: this.#o.registry, previous: this.#o.scheduler.config });
  }

  #apply(source?: 'file' | 'kv'): void {
    const [origin, next] = this.#kv
      ? ['kv' as const, this.#kv]
      : this.#file
        ? ['file' as const, this.#file]
        : ['default' as const, this.#defaults()];
    if (next.fingerprint === this.#active.fingerprint && origin === this.#active.origin) {
      if (source) this.#o.onReload?.(source, 'unchanged');
      return;
    }
    this.#o.scheduler.setConfig(next);
    this.#active = { origin, fingerprint: next.fingerprint, version: this.#active.version + 1 };
    if (source) this.#o.onReload?.(source, 'applied');
    this.#o.onApplied?.(next, origin);
    this.#o.log?.info({ origin, config: next.config }, 'scheduler config applied (effective, defaults filled in)');
    if (next.warnings.length > 0)
      this.#o.log?.warn({ origin, warnings: next.warnings }, 'scheduler config arguments Triad does not know were ignored');
  }

  #rejected(source: 'file' | 'kv', reasons: string[]): void {
    this.#o.onReload?.(source, 'rejected');
    this.#o.log?.error({ source, reasons, running: this.#active.origin }, 'invalid scheduler config rejected; keeping the running one');
  }

  #defaults(): LoadedSchedulerConfig {
    const result = this.#load(defaultSchedulerConfig());
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
