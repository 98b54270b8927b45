import { Agent, request } from 'undici';
import { GetError, KeepAliveGet, type GetOptions, type RequestDone } from './keepalive-get';

/**
 * Why a scrape failed (the `reason` label of `triad_podwatcher_scrape_errors_total`): `unauthorized` is a 401 or 403
 * (the engine checks an API key), `http` any other non-2xx answer.
 */
export const SCRAPE_FAILURE_REASONS = ['timeout', 'connect', 'http', 'unauthorized', 'body', 'parse'] as const;
export type ScrapeFailureReason = (typeof SCRAPE_FAILURE_REASONS)[number];

/** A failed scrape request, with a reason label for metrics and a message for the endpoint's `lastError`. */
export class ScrapeError extends Error {
  readonly reason: ScrapeFailureReason;
  /** The HTTP status of an `http` or `unauthorized` failure. */
  readonly status: number | undefined;
  constructor(reason: ScrapeFailureReason, message: string, status?: number) {
    super(message);
    this.name = 'ScrapeError';
    this.reason = reason;
    this.status = status;
  }
}

/** Throws the ScrapeError of a non-2xx answer to `url`. */
export function ensureOk(url: string, status: number): void {
  if (status < 200 || status >= 300) throw httpFailure(url, status);
}

/** The ScrapeError of a non-2xx answer to `url`. */
function httpFailure(url: string, status: number): ScrapeError {
  return new ScrapeError(status === 401 || status === 403 ? 'unauthorized' : 'http', `GET ${url}: HTTP ${status}`, status);
}

export interface EngineHttpOptions {
  /** Whole-request budget: connect, headers and body. */
  readonly timeoutMs: number;
  /** Larger bodies are cut off as errors (a /metrics page is tens of KB; this guards memory). */
  readonly maxBodyBytes?: number;
}

/**
 * Small HTTP calls to many engines over kept-alive connections: scrapes (GET) through {@link KeepAliveGet}, at
 * most two sockets per engine since the scraper sends at most one metrics and one models request to an engine at
 * once; other calls (the SGLang encoder registry, https) through undici.
 */
export class EngineHttp {
  readonly #agent: Agent;
  readonly #get: KeepAliveGet;
  readonly #timeoutMs: number;
  readonly #maxBody: number;
  readonly #getOptions: GetOptions;

  constructor(options: EngineHttpOptions) {
    this.#timeoutMs = options.timeoutMs;
    this.#maxBody = options.maxBodyBytes ?? 8 * 1024 * 1024;
    this.#getOptions = { timeoutMs: this.#timeoutMs, maxBodyBytes: this.#maxBody, accept: 'text/plain, application/json' };
    this.#agent = new Agent({ connections: 1, keepAliveTimeout: 30_000, connectTimeout: options.timeoutMs });
    this.#get = new KeepAliveGet({ keepAliveMs: 30_000 });
  }

  /**
   * Resolves to the body of a 2xx answer as text; rejects with a ScrapeError otherwise. `authorization` is sent as
   * the `Authorization` header (an engine's `--api-key` for its API routes; never logged).
   */
  getText(url: string, authorization?: string): Promise<string> {
    return this.read(url, (body) => body.toString('utf8'), authorization);
  }

  /**
   * Hands the body of a 2xx answer to `reader` and resolves to what it returns; rejects with a ScrapeError for a
   * failed request, or with what `reader` throws. The body is valid only during the call: its memory is reused
   * for the next answer (a scrape reads a few numbers of a 26 KB page thousands of times a second).
   */
  read<T>(url: string, reader: (body: Buffer) => T, authorization?: string): Promise<T> {
    return new Promise<T>((resolve, reject) =>
      this.request(
        url,
        (status, body) => {
          ensureOk(url, status);
          return reader(body);
        },
        (err, value) => (err ? reject(err) : resolve(value as T)),
        authorization,
      ),
    );
  }

  /**
   * {@link read} without a promise, for the scrape loop: `reader` gets the status too and must call
   * {@link ensureOk} (or judge the status itself); `done` gets a ScrapeError for a failed request, or what `reader`
   * threw, or its value. The same `reader` and `done` can serve every scrape of an engine.
   */
  request<T>(url: string, reader: (status: number, body: Buffer) => T, done: RequestDone<T>, authorization?: string): void {
    if (!url.startsWith('http://')) {
      this.#getBodyUndici(url, authorization)
        .then((body) => reader(200, body))
        .then(
          (value) => done(undefined, value),
          (err: unknown) => done(err, undefined),
        );
      return;
    }
    const options = authorization === undefined ? this.#getOptions : { ...this.#getOptions, authorization };
    this.#get.request(url, options, reader, (err, value) =>
      err === undefined ? done(undefined, value) : done(err instanceof GetError ? this.#scrapeError(url, err) : err, undefined),
    );
  }

  #scrapeError(url: string, err: GetError): ScrapeError {
    if (err.kind === 'timeout') return new ScrapeError('timeout', `GET ${url}: no complete answer within ${this.#timeoutMs} ms`);
    if (err.kind === 'too-large') return new ScrapeError('body', `GET ${url}: body larger than ${this.#maxBody} bytes`);
    if (err.kind === 'connect') return new ScrapeError('connect', `GET ${url}: ${err.code ? `${err.code} ` : ''}${err.message}`);
    return new ScrapeError('body', `GET ${url}: ${err.message}`);
  }

  async #getBodyUndici(url: string, authorization: string | undefined): Promise<Buffer> {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), this.#timeoutMs);
    try {
      const res = await request(url, {
        method: 'GET',
        dispatcher: this.#agent,
        signal: ctl.signal,
        headers: { accept: 'text/plain, application/json', ...(authorization === undefined ? {} : { authorization }) },
      });
      if (res.statusCode < 200 || res.statusCode >= 300) {
        res.body.dump().catch(() => undefined);
        throw httpFailure(url, res.statusCode);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > this.#maxBody) {
          res.body.destroy();
          throw new ScrapeError('body', `GET ${url}: body larger than ${this.#maxBody} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
      return Buffer.concat(chunks, size);
    } catch (err) {
      if (err instanceof ScrapeError) throw err;
      if (ctl.signal.aborted) throw new ScrapeError('timeout', `GET ${url}: no complete answer within ${this.#timeoutMs} ms`);
      const code = (err as { code?: string }).code;
      const reason: ScrapeFailureReason =
        code && /ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|UND_ERR_CONNECT|UND_ERR_SOCKET|EPIPE/.test(code) ? 'connect' : 'body';
      throw new ScrapeError(reason, `GET ${url}: ${code ? `${code} ` : ''}${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A JSON request (the SGLang encoder registry); resolves to the status and body text, whatever the status. */
  async send(method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown): Promise<{ status: number; text: string }> {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), this.#timeoutMs);
    try {
      const res = await request(url, {
        method,
        dispatcher: this.#agent,
        signal: ctl.signal,
        ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
      });
      return { status: res.statusCode, text: await res.body.text() };
    } catch (err) {
      if (ctl.signal.aborted) throw new ScrapeError('timeout', `${method} ${url}: no complete answer within ${this.#timeoutMs} ms`);
      throw new ScrapeError('connect', `${method} ${url}: ${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Lets the kept-alive connection to `baseUrl` (`http://host:port`) go: this replica no longer scrapes it. */
  forget(baseUrl: string): void {
    this.#get.forget(baseUrl);
  }

  async close(): Promise<void> {
    this.#get.close();
    await this.#agent.close().catch(() => this.#agent.destroy());
  }
}
