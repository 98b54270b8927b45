import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppliedFault, FaultController } from '../faults';
import type { SimCounters } from '../counters';
import type { EngineKind, SimLogger } from '../options';
import type { RequestLog } from '../request-log';
import type { SimClock } from '../engine/clock';
import { BodyTooLargeError, parseJsonBody, readBody, type ParsedBody } from './body';
import { EngineHttpError, errorBody } from './engine-error';
import { METHOD_NOT_ALLOWED_BODY, NOT_FOUND_BODY, sendJson } from './respond';

/** One received request with its body read, handed to a route handler. */
export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly method: string;
  readonly path: string;
  /** Raw query string without `?` ('' when absent). */
  readonly query: string;
  readonly rawBody: string;
  readonly body: ParsedBody;
  /** `performance.now()` at arrival. */
  readonly arrivedAt: number;
  /** The fault this request suffers (inference routes only): `die-mid-stream` is acted on by the handler. */
  readonly fault: AppliedFault | undefined;
}

export type RouteHandler = (ex: Exchange) => void | Promise<void>;

interface Route {
  readonly handler: RouteHandler;
  readonly inference: boolean;
}

export interface RouterDeps {
  readonly engine: EngineKind;
  readonly log: RequestLog;
  readonly faults: FaultController;
  readonly counters: SimCounters;
  readonly clock: SimClock;
  readonly logger?: SimLogger;
  /** `--api-key`: requests the engine checks must carry `Authorization: Bearer <key>` (see {@link needsApiKey}). */
  readonly apiKey?: string;
}

/**
 * Whether the engine's `--api-key` check covers a request: vLLM checks every `/v1` path (its AuthenticationMiddleware),
 * SGLang every path but health and metrics (its api-key middleware); neither checks OPTIONS.
 */
export function needsApiKey(engine: EngineKind, method: string, path: string): boolean {
  if (method === 'OPTIONS') return false;
  if (engine === 'vllm') return path.startsWith('/v1');
  return !path.startsWith('/health') && !path.startsWith('/metrics');
}

/** What both engines answer a request without the right key. */
const UNAUTHORIZED_BODY = '{"error":"Unauthorized"}';

const BODYLESS = new Set(['GET', 'HEAD']);

/**
 * Routes requests by method and exact path, logs them, and applies injected faults to inference routes before
 * the handler runs. Errors thrown by handlers are answered in the engine's own error shape.
 */
export class Router {
  readonly #routes = new Map<string, Map<string, Route>>();
  readonly #deps: RouterDeps;

  constructor(deps: RouterDeps) {
    this.#deps = deps;
  }

  add(method: string, path: string, handler: RouteHandler, opts: { inference?: boolean } = {}): this {
    let byMethod = this.#routes.get(path);
    if (!byMethod) this.#routes.set(path, (byMethod = new Map()));
    byMethod.set(method, { handler, inference: opts.inference ?? false });
    return this;
  }

  /** The node:http request listener. */
  readonly listener = (req: IncomingMessage, res: ServerResponse): void => {
    this.#handle(req, res).catch((err: unknown) => this.#fail(res, err));
  };

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const arrivedAt = performance.now();
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const query = q < 0 ? '' : url.slice(q + 1);
    const method = req.method ?? 'GET';
    const rawBody = BODYLESS.has(method) ? '' : await readBody(req);
    const body = parseJsonBody(rawBody);
    const byMethod = this.#routes.get(path);
    const route = byMethod?.get(method);
    const fault: AppliedFault | undefined = route?.inference === true ? this.#deps.faults.take() : undefined;
    if (this.#deps.log.enabled && !path.startsWith('/admin/')) {
      const entry = { method, path, headers: req.headers, body: body.ok ? body.value : rawBody, rawBody, at: Date.now() };
      this.#deps.log.add(fault?.mode === 'refuse' ? { ...entry, refused: true } : entry);
    }
    const apiKey = this.#deps.apiKey;
    if (apiKey !== undefined && needsApiKey(this.#deps.engine, method, path) && req.headers['authorization'] !== `Bearer ${apiKey}`) {
      this.#deps.counters.inc('unauthorized');
      sendJson(res, 401, UNAUTHORIZED_BODY);
      return;
    }
    if (!route) {
      sendJson(res, byMethod ? 405 : 404, byMethod ? METHOD_NOT_ALLOWED_BODY : NOT_FOUND_BODY);
      return;
    }
    if (route.inference) {
      if (fault) {
        this.#deps.counters.inc('faultsInjected');
        if (this.#applyEarlyFault(fault, req, res)) return;
        if (fault.mode === 'slow-first-byte') {
          await this.#deps.clock.sleep(fault.delayMs);
          // A request whose client left while it waited never reaches the engine (vLLM and SGLang drop it before
          // the scheduler sees it): nothing is allocated, nothing is pulled.
          if (res.destroyed || res.writableEnded) {
            this.#deps.counters.inc('aborted');
            return;
          }
        }
      }
    }
    await route.handler({ req, res, method, path, query, rawBody, body, arrivedAt, fault });
  }

  /** Faults that replace the whole answer; returns true when the request is finished with. */
  #applyEarlyFault(fault: AppliedFault, req: IncomingMessage, res: ServerResponse): boolean {
    switch (fault.mode) {
      case 'refuse':
        // Reset the connection without an answer: the client sees ECONNRESET, as with a dead pod behind a VIP.
        req.socket.resetAndDestroy();
        return true;
      case 'hang':
        // Never answer; the socket is closed by the client's timeout or by close().
        return true;
      case 'error500':
        sendJson(res, 500, errorBody(this.#deps.engine, new EngineHttpError(500, 'simulated engine failure (fault error500)')));
        return true;
      case 'error429':
        sendJson(res, 429, errorBody(this.#deps.engine, new EngineHttpError(429, 'simulated overload (fault error429)')), {
          'retry-after': '1',
        });
        return true;
      default:
        return false;
    }
  }

  #fail(res: ServerResponse, err: unknown): void {
    if (err instanceof BodyTooLargeError) {
      sendJson(res, 413, errorBody(this.#deps.engine, new EngineHttpError(413, err.message)));
      return;
    }
    const httpErr =
      err instanceof EngineHttpError ? err : new EngineHttpError(500, `internal error: ${(err as Error)?.message ?? String(err)}`);
    if (!(err instanceof EngineHttpError)) this.#deps.logger?.error({ err }, 'sim-engine handler failed');
    if (httpErr.status < 500) this.#deps.counters.inc('badRequests');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendJson(res, httpErr.status, errorBody(this.#deps.engine, httpErr));
  }
}
