import { backoffDelay, type Logger } from '@triad/runtime';

/** The informer surface the runner drives (client-node's `Informer`). */
export interface RunnableInformer {
  on(verb: 'error' | 'connect', cb: (err?: unknown) => void): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Restarts 250 ms, then doubling, up to 30 s apart, each drawn from [half, all] of its step. */
const RESTART_BACKOFF = { initialMs: 250, maxMs: 30_000, jitter: true };

/**
 * Keeps one client-node informer running. The informer relists by itself after 410 Gone and resumes after a
 * clean close, but after any other list or watch error it stops for good; the runner restarts it with
 * exponential backoff (and jitter, so many watchers do not hammer a recovering API server in step). `stop()`
 * aborts the watch, which the informer also reports as an error: that one must not restart it.
 */
export class InformerRunner {
  readonly #name: string;
  readonly #informer: RunnableInformer;
  readonly #logger: Logger;
  readonly #optional: boolean;
  /** HTTP status of the last failure, when it had one. */
  #lastCode: unknown;
  #errors = 0;
  #starting = false;
  #stopping = false;
  #attempt = 0;
  #timer: NodeJS.Timeout | undefined;
  #synced = false;
  #resolveSynced: () => void = () => undefined;
  readonly #syncedPromise = new Promise<void>((resolve) => {
    this.#resolveSynced = resolve;
  });

  /**
   * `optional`: a resource the API server may not serve (its CRD not installed). A 404 then counts as synced
   * (nothing to deliver) instead of holding readiness forever; the runner keeps retrying in the background.
   */
  constructor(name: string, informer: RunnableInformer, logger: Logger, options: { optional?: boolean } = {}) {
    this.#name = name;
    this.#informer = informer;
    this.#logger = logger;
    this.#optional = options.optional ?? false;
    informer.on('error', (err) => {
      this.#errors += 1;
      this.#lastCode = codeOf(err);
      if (this.#stopping) return;
      this.#logger.warn({ informer: name, err: describe(err) }, 'list/watch failed; restarting');
      if (!this.#starting) this.#scheduleRestart();
    });
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** Starts the informer; resolves after its first successful list and watch (retrying until then). */
  async start(): Promise<void> {
    if (await this.#attemptStart()) this.#markSynced();
    else {
      if (this.#optional && this.#lastCode === 404) {
        this.#logger.warn(
          { informer: this.#name },
          'resource not served by the API server (CRD not installed?); going on without it and retrying',
        );
        this.#markSynced();
      }
      this.#scheduleRestart();
    }
    await this.#syncedPromise;
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#informer.stop();
  }

  /** One start of the informer; true when it listed and opened its watch without an error. */
  async #attemptStart(): Promise<boolean> {
    this.#starting = true;
    const before = this.#errors;
    try {
      await this.#informer.start();
    } catch (err) {
      this.#errors += 1;
      this.#lastCode = codeOf(err);
      this.#logger.warn({ informer: this.#name, err: describe(err) }, 'informer start failed');
    } finally {
      this.#starting = false;
    }
    return this.#errors === before && !this.#stopping;
  }

  #scheduleRestart(): void {
    if (this.#timer || this.#stopping) return;
    const delay = backoffDelay(RESTART_BACKOFF, this.#attempt);
    this.#attempt += 1;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopping) return;
      void this.#attemptStart().then((ok) => {
        if (ok) {
          this.#logger.info({ informer: this.#name }, 'list/watch resumed');
          this.#attempt = 0;
          this.#markSynced();
        } else {
          this.#scheduleRestart();
        }
      });
    }, delay);
  }

  #markSynced(): void {
    if (this.#synced) return;
    this.#synced = true;
    this.#resolveSynced();
  }
}

function codeOf(err: unknown): unknown {
  return (err as { statusCode?: unknown; code?: unknown } | undefined)?.statusCode ?? (err as { code?: unknown } | undefined)?.code;
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown; statusCode?: unknown }).statusCode ?? (err as { code?: unknown }).code;
    return code !== undefined ? `${String(code)} ${err.message}` : err.message;
  }
  return String(err);
}
