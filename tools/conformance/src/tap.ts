import { createServer, request as httpRequest, Agent, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Exchange } from './exchange';

const RESPONSE_CAP = 256 * 1024;

/**
 * Makes a router's dispatch order observable without timing luck: an engine's answer on a prefill or decode leg is
 * held back until the other of the two has been called for the same request, or `holdMs` has passed. A router
 * that calls P and D concurrently has called both by then (the legs overlap); one that waits for P's answer before
 * calling D has not (they do not overlap), and an instant error on one leg cannot end it before the other starts.
 * The engine itself is not held: a prefill that hands KV to a waiting decode does so as usual.
 */
export class DispatchProbe {
  readonly #called = new Set<'prefill' | 'decode'>();
  #waiters: { role: 'prefill' | 'decode'; done: () => void }[] = [];

  constructor(readonly holdMs: number) {}

  /** A new client request begins. */
  reset(): void {
    for (const w of this.#waiters) w.done();
    this.#waiters = [];
    this.#called.clear();
  }

  called(role: 'prefill' | 'decode'): void {
    this.#called.add(role);
    const other = role === 'prefill' ? 'decode' : 'prefill';
    const ready = this.#waiters.filter((w) => w.role === other);
    this.#waiters = this.#waiters.filter((w) => w.role !== other);
    for (const w of ready) w.done();
  }

  /** Resolves when the other role was called or the hold ran out. */
  async answerMayGo(role: 'prefill' | 'decode'): Promise<void> {
    const other = role === 'prefill' ? 'decode' : 'prefill';
    if (this.#called.has(other) || this.holdMs <= 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, this.holdMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#waiters.push({ role, done });
    });
  }
}

export interface TapTarget {
  /** The engine-sim's listen address. */
  readonly host: string;
  readonly apiPort: number;
  readonly bootstrapPort?: number;
}

export interface TapOptions {
  readonly stage: string;
  /** The tap's own loopback address; it listens there on the target's port numbers. */
  readonly host: string;
  readonly target: TapTarget;
  /** Prefill and decode answers wait for the probe (see {@link DispatchProbe}). */
  readonly probeRole?: 'prefill' | 'decode';
  readonly probe?: DispatchProbe;
  readonly onExchange: (x: Exchange) => void;
}

/**
 * A transparent recording HTTP proxy in front of one engine-sim: it listens on its own loopback address with the
 * sim's port numbers (API and, for a prefill, bootstrap), so a router that derives the bootstrap address from the
 * prefill's host (vLLM's Mooncake proxy, SGLang's mini_lb) reaches the sim's bootstrap server through the tap too.
 * Bodies are forwarded unchanged, answers streamed back as they come.
 */
export class RecordingTap {
  readonly #servers: Server[] = [];
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 64 });
  #inFlight = 0;
  #lastActivityAt = 0;

  private constructor(readonly opts: TapOptions) {}

  static async start(opts: TapOptions): Promise<RecordingTap> {
    const tap = new RecordingTap(opts);
    await tap.#listen('api', opts.target.apiPort);
    if (opts.target.bootstrapPort !== undefined) await tap.#listen('bootstrap', opts.target.bootstrapPort);
    return tap;
  }

  get url(): string {
    return `http://${this.opts.host}:${this.opts.target.apiPort}`;
  }

  /** Exchanges not yet finished. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** When an exchange last started or finished (`performance.now()`; 0 before any). */
  get lastActivityAt(): number {
    return this.#lastActivityAt;
  }

  async #listen(port: 'api' | 'bootstrap', number: number): Promise<void> {
    const server = createServer((req, res) => this.#forward(port, number, req, res));
    server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(number, this.opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    if ((server.address() as AddressInfo).port !== number) throw new Error(`tap ${this.opts.stage} did not get port ${number}`);
    this.#servers.push(server);
  }

  #forward(port: 'api' | 'bootstrap', number: number, req: IncomingMessage, res: ServerResponse): void {
    const startedAt = performance.now();
    this.#inFlight += 1;
    this.#lastActivityAt = startedAt;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const [path = '/'] = (req.url ?? '/').split('?');
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
      const role = port === 'api' ? this.opts.probeRole : undefined;
      if (role) this.opts.probe?.called(role);
      let status = 0;
      let answered = 0;
      const answer: Buffer[] = [];
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        this.#inFlight -= 1;
        const endedAt = performance.now();
        this.#lastActivityAt = endedAt;
        this.opts.onExchange({
          stage: this.opts.stage,
          port,
          method: req.method ?? 'GET',
          path,
          headers,
          body: body.toString('utf8'),
          status,
          responseBody: Buffer.concat(answer).toString('utf8'),
          startedAt,
          endedAt,
        });
      };
      const upstream = httpRequest(
        { host: this.opts.target.host, port: number, method: req.method, path: req.url, headers: req.headers, agent: this.#agent },
        (up) => {
          status = up.statusCode ?? 0;
          const hold = role ? this.opts.probe?.answerMayGo(role) : undefined;
          void Promise.resolve(hold).then(() => {
            res.writeHead(status, up.headers);
            up.on('data', (c: Buffer) => {
              if (answered < RESPONSE_CAP) answer.push(c);
              answered += c.length;
              res.write(c);
            });
            up.on('end', () => {
              res.end();
              finish();
            });
            up.on('error', () => {
              res.destroy();
              finish();
            });
          });
        },
      );
      upstream.on('error', () => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end('tap: engine unreachable');
        finish();
      });
      // The router gave up: the engine sees its client leave too, as it would without the tap.
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
        finish();
      });
      upstream.end(body);
    });
  }

  async close(): Promise<void> {
    await Promise.all(
      this.#servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.closeAllConnections();
            s.close(() => resolve());
          }),
      ),
    );
    this.#agent.destroy();
  }
}
