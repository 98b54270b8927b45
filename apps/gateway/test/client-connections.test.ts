import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { counterTotal } from '@triad/testing/reliability';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

// Per-client connection cap and the client-side timeouts of the HTTP layer (client-connection-cap.ts, http-layer.ts),
// over real sockets. Each test speaks from its own loopback address (`localAddress`), so the gateway counts each
// one separately; 127.0.0.1 is left to the harness.

const MODEL = 'Qwen/Qwen2.5-0.5B';
const CAP = 4;
const HEADERS_TIMEOUT_MS = 300;
const REQUEST_TIMEOUT_MS = 800;
const HEALTHZ = 'GET /healthz HTTP/1.1\r\nhost: gateway\r\n\r\n';

/** One response as read off the wire. */
interface RawResponse {
  readonly status: number;
  /** Header values by lower-case name. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

function parse(raw: string): RawResponse {
  const end = raw.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = (end < 0 ? raw : raw.slice(0, end)).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1] ?? 0), headers, body: end < 0 ? '' : raw.slice(end + 4) };
}

/** A raw HTTP/1.1 client socket bound to one local address. */
class RawClient {
  #received = '';
  #changed: () => void = () => undefined;
  readonly closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      this.#received += chunk;
      this.#changed();
    });
    // A reset after the answer is not the test's concern: what was received is.
    socket.on('error', () => undefined);
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
  }

  static connect(port: number, localAddress: string): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: '127.0.0.1', localAddress }, () => resolve(new RawClient(socket)));
      socket.once('error', reject);
    });
  }

  /** Sends `request` and resolves with the next complete response (head and a content-length body). */
  async ask(request: string): Promise<RawResponse> {
    this.socket.write(request);
    for (;;) {
      const end = this.#received.indexOf('\r\n\r\n');
      if (end >= 0) {
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(this.#received.slice(0, end))?.[1] ?? 0);
        if (this.#received.length >= end + 4 + length) {
          const raw = this.#received.slice(0, end + 4 + length);
          this.#received = this.#received.slice(raw.length);
          return parse(raw);
        }
      }
      if (this.socket.readableEnded || this.socket.destroyed)
        throw new Error(`connection closed; received ${JSON.stringify(this.#received)}`);
      await Promise.race([new Promise<void>((resolve) => (this.#changed = resolve)), this.closed]);
    }
  }

  /** Everything received until the gateway closed the connection. */
  async untilClosed(): Promise<string> {
    await this.closed;
    return this.#received;
  }
}

describe('gateway, client connections: per-address cap and client timeouts', () => {
  let h: Harness;
  let sim: SimEngineHandle;
  const clients: RawClient[] = [];
  const open = async (address: string): Promise<RawClient> => {
    const c = await RawClient.connect(h.gateway.port, address);
    clients.push(c);
    return c;
  };
  const refused = () => counterTotal(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`, 'triad_gateway_connections_refused_total');

  beforeAll(async () => {
    h = await startHarness({
      config: {
        scheduling: 'in-process',
        maxConnectionsPerClient: CAP,
        headersTimeoutMs: `${HEADERS_TIMEOUT_MS}ms`,
        requestReceiveTimeoutMs: `${REQUEST_TIMEOUT_MS}ms`,
      },
    });
    sim = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.0.1', model: MODEL, latency: { decodeMsPerToken: 20 } });
    await h.putServer('cc', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'cc' } },
      workloadPort: { port: sim.port, protocol: 'http' },
    });
    await h.putEndpoint('cc', 'cc-0', 'aggregated', sim);
    await h.putRoute('cc', { modelName: MODEL, rules: [{ targetModels: [{ modelServerName: 'cc', weight: 100 }] }] });
    await h.waitForModel(MODEL);
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.socket.destroy();
  });
  afterAll(async () => {
    await h?.close();
  });

  it(`answers connection ${CAP + 1} from one address 429 (OpenAI-shaped, Connection: close) and closes it; the first ${CAP} and other addresses are served`, async () => {
    const refusedBefore = await refused();
    const admitted: RawClient[] = [];
    for (let i = 0; i < CAP; i++) {
      const c = await open('127.0.0.2');
      // Served, so the gateway counted it before the next one connects.
      expect((await c.ask(HEALTHZ)).status).toBe(200);
      admitted.push(c);
    }
    const extra = await open('127.0.0.2');
    const answer = parse(await extra.untilClosed());
    expect(answer.status).toBe(429);
    expect(answer.headers).toMatchObject({ connection: 'close', 'retry-after': '1', 'content-type': 'application/json' });
    const error = (JSON.parse(answer.body) as { error: { message: string; type: string; code: string } }).error;
    expect(error).toMatchObject({ type: 'rate_limit_error', code: 'GATEWAY_TOO_MANY_CONNECTIONS' });
    expect(error.message).toContain(`allows ${CAP}`);
    expect(await refused()).toBe(refusedBefore + 1);

    // The admitted connections still serve requests, and another address is not affected.
    for (const c of admitted) expect((await c.ask(HEALTHZ)).status).toBe(200);
    const other = await open('127.0.0.3');
    expect((await other.ask(HEALTHZ)).status).toBe(200);
  });

  it('drops what a refused connection sends: its request is not served', async () => {
    for (let i = 0; i < CAP; i++) expect((await (await open('127.0.0.5')).ask(HEALTHZ)).status).toBe(200);
    const before = inferenceRequests(sim).length;
    const extra = await RawClient.connect(h.gateway.port, '127.0.0.5');
    clients.push(extra);
    const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
    extra.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    const raw = await extra.untilClosed();
    // One answer, the 429, and nothing after it; the engine never saw the request.
    expect([...raw.matchAll(/HTTP\/1\.1 \d{3} /g)].map((m) => m[0])).toEqual(['HTTP/1.1 429 ']);
    expect(inferenceRequests(sim).length).toBe(before);
  });

  it('is read as the answer by a node:http client that sends its request (and a body) on the refused connection', async () => {
    for (let i = 0; i < CAP; i++) expect((await (await open('127.0.0.9')).ask(HEALTHZ)).status).toBe(200);
    const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'x'.repeat(200_000) }] });
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: h.gateway.port,
          localAddress: '127.0.0.9',
          method: 'POST',
          path: '/v1/chat/completions',
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(answer.status).toBe(429);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { type: 'rate_limit_error', code: 'GATEWAY_TOO_MANY_CONNECTIONS' } });
  });

  it('frees a slot when a connection of the address closes', async () => {
    const admitted: RawClient[] = [];
    for (let i = 0; i < CAP; i++) {
      const c = await open('127.0.0.4');
      expect((await c.ask(HEALTHZ)).status).toBe(200);
      admitted.push(c);
    }
    expect(parse(await (await open('127.0.0.4')).untilClosed()).status).toBe(429);
    admitted[0]?.socket.destroy();
    // Once the gateway has seen the close, a new connection from the address is served.
    const next = await waitFor(
      async () => {
        const c = await open('127.0.0.4');
        const first = await Promise.race([c.ask(HEALTHZ), c.closed.then(() => undefined)]);
        return first?.status === 200 ? c : undefined;
      },
      { what: 'a connection from 127.0.0.4 served after one of its connections closed' },
    );
    expect((await next.ask(HEALTHZ)).status).toBe(200);
  });

  it(`cuts a client that sends half its headers after headers-timeout-ms (${HEADERS_TIMEOUT_MS} ms) with an OpenAI-shaped 408`, async () => {
    const c = await open('127.0.0.6');
    const started = Date.now();
    c.socket.write('POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: appl');
    const answer = parse(await c.untilClosed());
    const elapsed = Date.now() - started;
    expect(answer.status).toBe(408);
    expect(answer.headers['connection']).toBe('close');
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'GATEWAY_REQUEST_TIMEOUT' } });
    expect(elapsed).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS);
    // node's default header timeout is 60 s; well under that shows the setting is what cut it.
    expect(elapsed).toBeLessThan(10_000);
  });

  it(`cuts a client whose body is not complete within request-receive-timeout-ms (${REQUEST_TIMEOUT_MS} ms) with a 408`, async () => {
    const c = await open('127.0.0.7');
    const started = Date.now();
    c.socket.write(
      'POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"mo',
    );
    const answer = parse(await c.untilClosed());
    expect(answer.status).toBe(408);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: 'GATEWAY_REQUEST_TIMEOUT' } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS);
  });

  it('completes a streaming answer that lasts longer than both timeouts (they time receiving the request, not the answer)', async () => {
    const started = Date.now();
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // 100 tokens at 20 ms: about 2 s, over twice the request timeout.
      body: JSON.stringify({ model: MODEL, stream: true, max_tokens: 100, ignore_eos: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    const elapsed = Date.now() - started;
    const chunks = text.split('\n\n').filter((e) => e.startsWith('data: {'));
    const last = JSON.parse(chunks.at(-1)?.slice('data: '.length) ?? '{}') as { choices?: { finish_reason?: string }[] };
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(last.choices?.[0]?.finish_reason).toBe('length');
    expect(elapsed).toBeGreaterThan(REQUEST_TIMEOUT_MS);
  });
});
