import type { FastifyInstance } from 'fastify';

export interface ListenerServerLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * One HTTP server per Gateway listener port besides the gateway's own `--port` (which serves its listeners
 * itself): opened when a Gateway record names a new port, closed when no listener uses it any more. A port
 * that cannot be bound is logged and tried again on the next change.
 */
export class ListenerServers {
  readonly #servers = new Map<number, FastifyInstance>();
  readonly #build: () => FastifyInstance;
  readonly #host: string;
  readonly #logger: ListenerServerLogger;
  #mainPort = -1;
  #wanted: ReadonlySet<number> = new Set();
  #syncing: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(build: () => FastifyInstance, host: string, logger: ListenerServerLogger) {
    this.#build = build;
    this.#host = host;
    this.#logger = logger;
  }

  /** The gateway's own port is listening: listeners on it need no server of their own. */
  start(mainPort: number): Promise<void> {
    this.#mainPort = mainPort;
    return this.sync(this.#wanted);
  }

  /** Opens and closes servers so that exactly `ports` (minus the main port) are served; calls are serialized. */
  sync(ports: ReadonlySet<number>): Promise<void> {
    this.#wanted = ports;
    if (this.#mainPort < 0) return Promise.resolve();
    this.#syncing = this.#syncing.then(() => this.#apply());
    return this.#syncing;
  }

  get ports(): number[] {
    return [...this.#servers.keys()];
  }

  async #apply(): Promise<void> {
    if (this.#closed) return;
    for (const [port, app] of this.#servers) {
      if (this.#wanted.has(port) && port !== this.#mainPort) continue;
      this.#servers.delete(port);
      await app.close();
      this.#logger.info({ port }, 'Gateway listener port closed');
    }
    for (const port of this.#wanted) {
      if (port === this.#mainPort || this.#servers.has(port)) continue;
      const app = this.#build();
      try {
        await app.listen({ port, host: this.#host });
        this.#servers.set(port, app);
        this.#logger.info({ port }, 'Gateway listener port open');
      } catch (err) {
        await app.close().catch(() => undefined);
        this.#logger.warn({ port, err: (err as Error).message }, 'cannot open a Gateway listener port');
      }
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#syncing;
    await Promise.all([...this.#servers.values()].map((a) => a.close()));
    this.#servers.clear();
  }
}
