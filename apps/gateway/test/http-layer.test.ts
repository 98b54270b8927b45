import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import OpenAI from 'openai';
import type { SimEngineHandle } from '@triad/engine-sim';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

const MODEL = 'm-http';
const LIMIT = 64 * 1024;

/** Sends raw bytes on a fresh connection and resolves with everything the server wrote until it closed. */
function rawExchange(port: number, chunks: readonly (string | Buffer)[], waitMs = 0): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let out = '';
    socket.on('data', (d) => (out += d.toString('latin1')));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' || err.code === 'EPIPE' ? resolve(out) : reject(err)));
    socket.on('close', () => resolve(out));
    socket.on('connect', () => {
      const write = (i: number): void => {
        if (i >= chunks.length) return;
        socket.write(chunks[i], () => setTimeout(() => write(i + 1), waitMs));
      };
      write(0);
    });
  });
}

function statusOf(raw: string): number {
  return Number(raw.slice(9, 12));
}

function jsonBodyOf(raw: string): { error: { message: string; type: string; code: string } } {
  const start = raw.indexOf('\r\n\r\n');
  return JSON.parse(raw.slice(start + 4)) as { error: { message: string; type: string; code: string } };
}

function chatBody(size: number): string {
  const filler = 'x'.repeat(Math.max(0, size - 80));
  return JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: filler }], max_tokens: 2 });
}

describe('gateway HTTP layer: 413 clients can read, OpenAI-shaped protocol errors, echo limits, engine Authorization', () => {
  let h: Harness;
  let sim: SimEngineHandle;
  let port: number;

  beforeAll(async () => {
    h = await startHarness({ config: { bodyLimit: LIMIT, bodyDiscardLimit: 4 * 1024 * 1024 } });
    port = h.gateway.port;
    sim = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.17.1', model: MODEL });
    const base = {
      model: MODEL,
      inferenceEngine: 'vLLM' as const,
      workloadSelector: { matchLabels: { app: 'h' } },
      workloadPort: { port: 8000, protocol: 'http' as const },
    };
    await h.putServer('plain', base);
    await h.putServer('pass', { ...base, engineAuth: { passThrough: true } });
    await h.putRoute('plain', { modelName: MODEL, rules: [{ targetModels: [{ modelServerName: 'plain', weight: 100 }] }] });
    await h.putRoute('pass', { modelName: 'm-pass', rules: [{ targetModels: [{ modelServerName: 'pass', weight: 100 }] }] });
    const plain = await h.putEndpoint('plain', 'a', 'aggregated', sim);
    const pass = await h.putEndpoint('pass', 'a', 'aggregated', sim);
    h.decide = (r) => ({
      id: r.id,
      ok: true,
      mode: 'aggregated',
      encoders: [],
      attempts: [{ endpoint: r.modelServer === 'pass' ? pass : plain }],
    });
    await h.waitForModel(MODEL);
    await h.waitForModel('m-pass');
  });
  afterAll(async () => {
    await h?.close();
  });

  describe('a body over the limit', () => {
    const big = chatBody(1024 * 1024);

    it('node:http reads the 413 (no EPIPE), with Connection: close', async () => {
      const answer = await new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
          },
        );
        req.on('error', reject);
        // Written in pieces, as a client uploading a large body does.
        for (let i = 0; i < big.length; i += 16 * 1024) req.write(big.slice(i, i + 16 * 1024));
        req.end();
      });
      expect(answer.status).toBe(413);
      expect(answer.headers['connection']).toBe('close');
      expect(JSON.parse(answer.body)).toEqual({
        error: {
          message: `request body is larger than the gateway accepts (${LIMIT} bytes, setting body-limit)`,
          type: 'invalid_request_error',
          param: null,
          code: 'GATEWAY_BODY_TOO_LARGE',
        },
      });
    });

    it('fetch reads the 413, with a declared length and chunked', async () => {
      const declared = await fetch(`${h.gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: big,
      });
      expect(declared.status).toBe(413);
      expect(((await declared.json()) as { error: { code: string } }).error.code).toBe('GATEWAY_BODY_TOO_LARGE');
      const encoder = new TextEncoder();
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 16; i++) controller.enqueue(encoder.encode(big.slice(i * 65536, (i + 1) * 65536)));
          controller.close();
        },
      });
      const chunked = await fetch(`${h.gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: stream,
        duplex: 'half',
      });
      expect(chunked.status).toBe(413);
    });

    it('the openai SDK gets an APIError 413 (not a connection error it would retry)', async () => {
      const client = new OpenAI({ baseURL: `${h.gateway.url}/v1`, apiKey: 'x', maxRetries: 2 });
      const err = await client.chat.completions
        .create({
          model: MODEL,
          messages: [{ role: 'user', content: 'x'.repeat(1024 * 1024) }],
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
      expect(inferenceRequests(sim).filter((r) => r.body !== undefined && JSON.stringify(r.body).length > LIMIT)).toHaveLength(0);
    });

    it('a raw socket reads the 413 after sending its whole body, and the server closes the connection', async () => {
      const raw = await rawExchange(port, [
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${big.length}\r\n\r\n`,
        big,
      ]);
      expect(statusOf(raw)).toBe(413);
      expect(raw.toLowerCase()).toContain('connection: close');
      expect(jsonBodyOf(raw).error.code).toBe('GATEWAY_BODY_TOO_LARGE');
    });

    it('a declared length past the discard bound gets its 413 at once', async () => {
      const raw = await rawExchange(port, [
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${100 * 1024 * 1024}\r\n\r\n`,
      ]);
      expect(statusOf(raw)).toBe(413);
    });

    it('Expect: 100-continue with a length over the limit gets the 413 instead of 100 Continue', async () => {
      const raw = await rawExchange(port, [
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${big.length}\r\nexpect: 100-continue\r\n\r\n`,
      ]);
      expect(raw.startsWith('HTTP/1.1 413 ')).toBe(true);
      expect(raw).not.toContain('100 Continue');
    });
  });

  it('Expect: 100-continue within the limit continues and is served', async () => {
    const body = chatBody(200);
    const raw = await rawExchange(
      port,
      [
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n` +
          'expect: 100-continue\r\nconnection: close\r\n\r\n',
        body,
      ],
      20,
    );
    expect(raw.startsWith('HTTP/1.1 100 Continue')).toBe(true);
    expect(raw).toContain('HTTP/1.1 200 OK');
  });

  it.each([
    ['another expectation', 'GET /v1/models HTTP/1.1\r\nhost: x\r\nexpect: something-else\r\n\r\n', 417, 'GATEWAY_EXPECTATION_FAILED'],
    ['a missing Host on HTTP/1.1', 'GET /v1/models HTTP/1.1\r\n\r\n', 400, 'GATEWAY_BAD_REQUEST'],
    [
      'headers over the limit',
      `GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'GATEWAY_HEADERS_TOO_LARGE',
    ],
    ['a bad header name', 'GET /v1/models HTTP/1.1\r\nhost: x\r\nbad header: 1\r\n\r\n', 400, 'GATEWAY_BAD_REQUEST'],
    ['a bad header value', 'GET /v1/models HTTP/1.1\r\nhost: x\r\nx-v: a\x01b\r\n\r\n', 400, 'GATEWAY_BAD_REQUEST'],
    [
      'both Content-Length and Transfer-Encoding',
      'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n',
      400,
      'GATEWAY_BAD_REQUEST',
    ],
    [
      'bad chunk framing',
      'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      400,
      'GATEWAY_BAD_REQUEST',
    ],
    ['a garbage request line', 'HELLO\r\n\r\n', 400, 'GATEWAY_BAD_REQUEST'],
    ['a malformed URL', 'POST /v1/%zz%E0%A4%A HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n', 400, 'GATEWAY_BAD_REQUEST'],
  ])('answers %s OpenAI-shaped', async (_what, request, status, code) => {
    const raw = await rawExchange(port, [request]);
    expect(statusOf(raw)).toBe(status);
    const body = jsonBodyOf(raw);
    expect(body.error.code).toBe(code);
    expect(typeof body.error.message).toBe('string');
    expect(body.error.type).toBe('invalid_request_error');
  });

  it('an HTTP/1.0 request without Host is served', async () => {
    const raw = await rawExchange(port, ['GET /healthz HTTP/1.0\r\n\r\n']);
    expect(statusOf(raw)).toBe(200);
  });

  it('cuts echoed client values short in error bodies and the access log', async () => {
    const model = `z${'q'.repeat(250)}`;
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(404);
    const message = ((await res.json()) as { error: { message: string } }).error.message;
    expect(message).toBe(`The model '${model.slice(0, 128)}… (251 characters)' does not exist (no ModelRoute matches it)`);
    const path = `/v1/${'p'.repeat(8000)}`;
    const notFound = await fetch(`${h.gateway.url}${path}`);
    const text = await notFound.text();
    expect(notFound.status).toBe(404);
    expect(text.length).toBeLessThan(500);
  });

  it("does not forward the client's Authorization to the engine unless the ModelServer passes it through", async () => {
    sim.clearRequests();
    const headers = { 'content-type': 'application/json', authorization: 'Bearer triad-client-key' };
    for (const model of [MODEL, 'm-pass']) {
      const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      });
      expect(res.status).toBe(200);
    }
    const sent = inferenceRequests(sim);
    expect(sent).toHaveLength(2);
    expect(sent[0]?.headers['authorization']).toBeUndefined();
    expect(sent[1]?.headers['authorization']).toBe('Bearer triad-client-key');
  });
});
