import { Pool } from 'undici';

/** Connection-pool settings for engine endpoints. */
export interface UpstreamPoolOptions {
  /** Most sockets to one endpoint. */
  readonly connections: number;
  /** How long an idle keep-alive socket is kept. */
  readonly keepAliveTimeoutMs: number;
  /** Budget for establishing a TCP connection. */
  readonly connectTimeoutMs: number;
}

/** Defaults sized for one gateway in front of a handful of engines. */
function defaultUpstreamPoolOptions(): UpstreamPoolOptions {
  return { connections: 256, keepAliveTimeoutMs: 30_000, connectTimeoutMs: 5_000 };
}

/** The origin string of an engine address (IPv6 literals in brackets). */
function originOf(ip: string, port: number): string {
  return ip.includes(':') && !ip.startsWith('[') ? `http://[${ip}]:${port}` : `http://${ip}:${port}`;
}

/**
 * One undici keep-alive Pool per engine address, created on first use. Timeouts are left to the stage loop
 * (it knows which stage a leg belongs to), so the pools run with undici's header/body timers off.
 */
export class UpstreamPools {
  readonly #pools = new Map<string, Pool>();
  readonly #options: UpstreamPoolOptions;

  constructor(options: Partial<UpstreamPoolOptions> = {}) {
    this.#options = { ...defaultUpstreamPoolOptions(), ...options };
  }

  /** The pool for `ip:port`. */
  get(ip: string, port: number): Pool {
    const key = `${ip}:${port}`;
    let pool = this.#pools.get(key);
    if (pool === undefined) {
      pool = new Pool(originOf(ip, port), {
        connections: this.#options.connections,
        pipelining: 1,
        keepAliveTimeout: this.#options.keepAliveTimeoutMs,
        connectTimeout: this.#options.connectTimeoutMs,
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      this.#pools.set(key, pool);
    }
    return pool;
  }

  /** Number of pools currently open. */
  get size(): number {
    return this.#pools.size;
  }

  /** Closes the pool of an address that left (in-flight requests on it finish first). */
  release(ip: string, port: number): void {
    const key = `${ip}:${port}`;
    const pool = this.#pools.get(key);
    if (pool === undefined) return;
    this.#pools.delete(key);
    void pool.close().catch(() => undefined);
  }

  /** Closes every pool; with `force` in-flight requests are aborted. */
  async close(force = false): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((p) => (force ? p.destroy() : p.close()).catch(() => undefined)));
  }
}
