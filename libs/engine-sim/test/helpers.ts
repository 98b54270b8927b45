import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';

/** Starts sims and closes every one of them in `closeAll()` (call it from afterAll). */
export class SimFleet {
  readonly #sims: SimEngineHandle[] = [];

  async start(opts: SimEngineOptions): Promise<SimEngineHandle> {
    const sim = await startSimEngine(opts);
    this.#sims.push(sim);
    return sim;
  }

  /** Closes the sim serving `url` (it stops answering, as a crashed engine does). */
  async closeOne(url: string): Promise<void> {
    const at = this.#sims.findIndex((s) => s.url === url);
    if (at < 0) throw new Error(`no sim at ${url}`);
    const [sim] = this.#sims.splice(at, 1);
    await sim?.close();
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.#sims.splice(0).map((s) => s.close()));
  }
}

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  json<T = Record<string, unknown>>(): T;
}

/** POSTs a body (objects are JSON-encoded, strings sent as they are) and reads the whole answer. */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return answer(res);
}

export async function get(url: string, init: RequestInit = {}): Promise<HttpAnswer> {
  return answer(await fetch(url, init));
}

async function answer(res: Response): Promise<HttpAnswer> {
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: <T>() => JSON.parse(text) as T };
}

/** Splits an SSE body into the `data:` payloads; asserts every event is framed `data: …\n\n`. */
export function sseEvents(text: string): string[] {
  if (!text.endsWith('\n\n')) throw new Error(`stream does not end with a blank line: ${JSON.stringify(text.slice(-40))}`);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((e) => {
      if (!e.startsWith('data: ')) throw new Error(`bad SSE event ${JSON.stringify(e)}`);
      return e.slice('data: '.length);
    });
}

export const CHAT = [{ role: 'user', content: 'What is disaggregated inference?' }];

export interface RawAnswer {
  readonly status: number | undefined;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** False when the connection broke before the response ended (or before it began). */
  readonly complete: boolean;
  readonly error?: string;
}

/** POSTs with node:http and reports whatever arrived, also when the server drops the connection midway. */
export function rawPost(url: string, body: unknown, signal?: AbortSignal): Promise<RawAnswer> {
  const { request } = require('node:http') as typeof import('node:http');
  return new Promise((resolve) => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    const req = request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), connection: 'close' },
      signal,
    });
    req.on('response', (res) => {
      let received = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (received += d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: received, complete: true }));
      res.on('error', (err) =>
        resolve({ status: res.statusCode, headers: res.headers, body: received, complete: false, error: err.message }),
      );
      res.on('aborted', () => resolve({ status: res.statusCode, headers: res.headers, body: received, complete: false, error: 'aborted' }));
    });
    req.on('error', (err) => resolve({ status: undefined, headers: {}, body: '', complete: false, error: err.message }));
    req.end(text);
  });
}
