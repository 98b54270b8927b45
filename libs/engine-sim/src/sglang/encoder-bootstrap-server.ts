import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request, type Dispatcher } from 'undici';
import { readBody } from '../http/body';
import { METHOD_NOT_ALLOWED_BODY, NOT_FOUND_BODY, sendJson, sendText } from '../http/respond';
import type { EncoderRegistry } from './encoder-registry';
import { listen } from '../http/listen';

export interface EncoderBootstrapServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly registry: EncoderRegistry;
  /** Outbound connections for the health probes. */
  readonly dispatcher: Dispatcher;
  /** `SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_INTERVAL` (10 s); 0 disables probing. */
  readonly healthCheckIntervalMs: number;
  /** `SGLANG_ENCODER_BOOTSTRAP_HEALTH_CHECK_TIMEOUT` (2 s). */
  readonly healthCheckTimeoutMs: number;
  /** Called after every probe round (counters, tests waiting for a round). */
  readonly onProbeRound?: (probed: number) => void;
}

const ROUTES: Readonly<Record<string, string>> = {
  '/health': 'GET',
  '/register_encoder_url': 'POST',
  '/unregister_encoder_url': 'DELETE',
  '/list_encoder_urls': 'GET',
};

/** FastAPI's 422 for a body that is not a JSON object (the routes take `data: dict`). */
function notADict(input: unknown): string {
  const detail = { type: 'dict_type', loc: ['body'], msg: 'Input should be a valid dictionary', input: input ?? null };
  return JSON.stringify({ detail: [detail] });
}

/**
 * SGLang's EncoderBootstrapServer: a listener of its own on `--encoder-bootstrap-port` (default 8997) next to a
 * language-only server's API port. `GET /health` → `OK`, `POST /register_encoder_url {"url"}` → `OK`,
 * `DELETE /unregister_encoder_url {"url"}` → `OK` whether or not the URL was there, `GET /list_encoder_urls` →
 * `{"encoder_urls":[…]}`; a missing or empty `url` is 400 `{"error":"Missing or empty 'url' field"}`. It also
 * health-checks the registry's members (`GET {url}/health` every interval).
 */
export class EncoderBootstrapServer {
  readonly #server: Server;
  readonly #opts: EncoderBootstrapServerOptions;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #port = 0;

  private constructor(opts: EncoderBootstrapServerOptions) {
    this.#opts = opts;
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch(() => sendText(res, 500, 'Internal Server Error'));
    });
    this.#server.keepAliveTimeout = 5_000;
  }

  static async start(opts: EncoderBootstrapServerOptions): Promise<EncoderBootstrapServer> {
    const server = new EncoderBootstrapServer(opts);
    server.#port = await listen(server.#server, opts.host, opts.port);
    server.#schedule();
    return server;
  }

  get port(): number {
    return this.#port;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const method = ROUTES[path];
    if (method === undefined) return sendJson(res, 404, NOT_FOUND_BODY);
    if (req.method !== method) return sendJson(res, 405, METHOD_NOT_ALLOWED_BODY);
    const { registry } = this.#opts;
    if (path === '/health') return sendText(res, 200, 'OK');
    if (path === '/list_encoder_urls') return sendJson(res, 200, JSON.stringify({ encoder_urls: registry.list() }));
    const text = await readBody(req);
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      return sendJson(res, 422, notADict(text));
    }
    if (!data || typeof data !== 'object' || Array.isArray(data)) return sendJson(res, 422, notADict(data));
    const url = (data as { url?: unknown }).url;
    if (typeof url !== 'string' || url.length === 0) return sendJson(res, 400, JSON.stringify({ error: "Missing or empty 'url' field" }));
    if (path === '/register_encoder_url') registry.register(url);
    else registry.unregister(url);
    sendText(res, 200, 'OK');
  }

  #schedule(): void {
    const { healthCheckIntervalMs } = this.#opts;
    if (healthCheckIntervalMs <= 0 || this.#closed) return;
    this.#timer = setTimeout(() => {
      // Detached on purpose: #probeRound turns every probe failure into a `false` result, so only a throwing
      // onProbeRound (a test hook) rejects, and that should fail loudly as an unhandled rejection.
      void this.#probeRound().finally(() => this.#schedule());
    }, healthCheckIntervalMs);
    this.#timer.unref?.();
  }

  async #probeRound(): Promise<void> {
    const { registry } = this.#opts;
    const now = Date.now();
    const candidates = registry.probeCandidates(now);
    const results = await Promise.all(candidates.map((url) => this.#probe(url)));
    if (this.#closed) return;
    candidates.forEach((url, i) => registry.probed(url, results[i], now));
    this.#opts.onProbeRound?.(candidates.length);
  }

  async #probe(url: string): Promise<boolean> {
    const { dispatcher, healthCheckTimeoutMs } = this.#opts;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), healthCheckTimeoutMs);
    try {
      const res = await request(`${url}/health`, { dispatcher, signal: ctl.signal });
      await res.body.dump();
      return res.statusCode === 200;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    return new Promise((resolve) => {
      this.#server.closeAllConnections();
      this.#server.close(() => resolve());
    });
  }
}
