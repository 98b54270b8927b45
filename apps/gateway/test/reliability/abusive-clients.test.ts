import { connect, type Socket } from 'node:net';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { counterTotal } from '@triad/testing/reliability';
import { accessLines, inferenceRequests, startHarness, type Harness } from '../support/harness';
import { unexpectedErrors, watchUnhandledRejections } from './support/matrix-stack';
import { vllmEpdSpec } from '../support/specs';

// Abusive clients (issue 16): slowloris headers and bodies, clients that leave mid-request and mid-stream (in
// aggregated, PD and EPD), streaming clients that never read, oversized bodies in parallel, pipelined requests
// followed by garbage. The gateway stays up, serves everyone else meanwhile, aborts the engine legs of clients that
// left, and counts no unexpected error.

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
const BODY_LIMIT = 256 * 1024;

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends raw bytes and resolves with all the server wrote until it closed the connection. */
function exchange(port: number, bytes: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let out = '';
    socket.on('data', (d: Buffer) => (out += d.toString('latin1')));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' || err.code === 'EPIPE' ? resolve(out) : reject(err)));
    socket.on('close', () => resolve(out));
  });
}

/** The statuses of every response in a raw HTTP/1.1 exchange, in order. */
function statuses(raw: string): number[] {
  return [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
}

/**
 * A prompt of well over the 512 uncached tokens a decode pod may prefill itself (per-request disaggregation,
 * `maxLocalPrefillTokens`), so PD and EPD requests run their prefill leg; it starts with a fresh nonce, so no pod
 * holds any of its blocks from an earlier request.
 */
function longPrompt(): string {
  return `${Math.random()} Summarise these notes in one line. ${'The quick brown fox jumps over the lazy dog. '.repeat(120)}`;
}

function chatBody(model: string, extra: Record<string, unknown> = {}): string {
  const content =
    model === 'ab-epd'
      ? [
          { type: 'text', text: longPrompt() },
          { type: 'image_url', image_url: { url: `https://example.com/${Math.random()}.png` } },
        ]
      : model === 'ab-pd'
        ? longPrompt()
        : 'hello';
  return JSON.stringify({ model, max_tokens: 4, messages: [{ role: 'user', content }], ...extra });
}

describe('reliability: abusive clients', () => {
  let h: Harness;
  let rejections: ReturnType<typeof watchUnhandledRejections>;
  let port: number;
  const sims: Record<string, SimEngineHandle> = {};
  const sockets: Socket[] = [];
  const timers: NodeJS.Timeout[] = [];

  /** A well-behaved client: every answer must be a 200 while the abuse goes on. */
  const served = async (n: number) => {
    const models = ['ab-agg', 'ab-pd', 'ab-epd'];
    const prefillsBefore = prefills();
    const results = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: chatBody(models[i % 3], { stream: i % 2 === 0 }),
        });
        await res.text();
        return res.status;
      }),
    );
    expect(results).toEqual(results.map(() => 200));
    // Every PD and EPD request ran its prefill leg (one each: nothing failed, so nothing was retried).
    const modes = Array.from({ length: n }, (_, i) => models[i % 3]);
    expect(prefills()).toEqual({
      pd: prefillsBefore.pd + modes.filter((m) => m === 'ab-pd').length,
      epd: prefillsBefore.epd + modes.filter((m) => m === 'ab-epd').length,
    });
  };
  const prefills = () => ({
    pd: inferenceRequests(sims['pd-p']).length,
    epd: inferenceRequests(sims['epd-p']).length,
  });
  const metric = (name: string) => counterTotal(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`, name);
  const abortedAt = (names: string[]) => names.reduce((n, s) => n + (sims[s]?.counters()['aborted'] ?? 0), 0);

  beforeAll(async () => {
    rejections = watchUnhandledRejections();
    h = await startHarness({
      config: {
        scheduling: 'in-process',
        bodyLimit: BODY_LIMIT,
        bodyDiscardLimit: 4 * 1024 * 1024,
        // The slowloris clients must still be connected while the others are served, however long that takes on a
        // loaded machine; the header timeout cutting them is client-connections.test.ts's.
        headersTimeoutMs: '60s',
      },
    });
    port = h.gateway.port;
    const port8000 = { port: 8000, protocol: 'http' as const };
    // Engines that take their time per token, so a stream is still running when its client misbehaves.
    const paced = { latencyProfile: 'realistic', latency: { decodeMsPerToken: 2, prefillMsPer1kTokens: 1, encodeMsPerItem: 1 } } as const;
    sims['agg'] = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.52.1', model: MODEL, ...paced });
    await h.putServer('ab-agg', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'a' } },
      workloadPort: port8000,
    });
    await h.putEndpoint('ab-agg', 'a', 'aggregated', sims['agg']);
    sims['pd-p'] = await h.startSim({ engine: 'vllm', role: 'prefill', host: '127.0.52.2', model: MODEL, ...paced });
    sims['pd-d'] = await h.startSim({ engine: 'vllm', role: 'decode', host: '127.0.52.3', model: MODEL, ...paced });
    await h.putServer('ab-pd', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      kvConnector: { type: 'nixl' },
      workloadPort: port8000,
      workloadSelector: { matchLabels: { app: 'p' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putEndpoint('ab-pd', 'p', 'prefill', sims['pd-p'], { group: 'g1' });
    await h.putEndpoint('ab-pd', 'd', 'decode', sims['pd-d'], { group: 'g1' });
    const vllm = { engine: 'vllm', model: MODEL, ecConnector: 'nixl', ...paced } as const;
    sims['epd-e'] = await h.startSim({ ...vllm, role: 'encode', host: '127.0.52.4' });
    sims['epd-p'] = await h.startSim({ ...vllm, role: 'prefill', host: '127.0.52.5', enableMmEmbeds: true });
    sims['epd-d'] = await h.startSim({ ...vllm, role: 'decode', host: '127.0.52.6', enableMmEmbeds: true });
    await h.putServer(
      'ab-epd',
      vllmEpdSpec(MODEL, 'e', { ecConnector: { type: 'nixl', enableMmEmbeds: true, maxEncoderBatch: 16, reencodeAttempts: 1 } }),
    );
    await h.putEndpoint('ab-epd', 'e', 'encode', sims['epd-e'], { group: 'g1' });
    await h.putEndpoint('ab-epd', 'p', 'prefill', sims['epd-p'], { group: 'g1' });
    await h.putEndpoint('ab-epd', 'd', 'decode', sims['epd-d'], { group: 'g1' });
    for (const m of ['ab-agg', 'ab-pd', 'ab-epd']) {
      await h.putRoute(m, { modelName: m, rules: [{ targetModels: [{ modelServerName: m, weight: 100 }] }] });
      await h.waitForModel(m);
    }
  }, 60_000);
  afterEach(() => {
    for (const t of timers.splice(0)) clearInterval(t);
    for (const s of sockets.splice(0)) s.destroy();
  });
  afterAll(async () => {
    rejections?.stop();
    await h?.close();
  });

  it('serves others while 100 slowloris clients trickle their headers and 100 their bodies', async () => {
    for (let i = 0; i < 200; i++) {
      const s = await open(port);
      s.on('error', () => undefined);
      sockets.push(s);
      const body = chatBody('ab-agg');
      s.write(
        i < 100
          ? 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n'
          : `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length + 10_000}\r\n\r\n${body.slice(0, 10)}`,
      );
      // One byte every 100 ms: a header line that never ends, or a body that never completes.
      timers.push(setInterval(() => s.write(i < 100 ? 'x' : ' '), 100));
    }
    await served(12);
    expect(sockets.every((s) => !s.destroyed)).toBe(true);
  });

  it('aborts the engine legs of clients that leave mid-request or mid-stream (aggregated, PD, EPD), and records 499', async () => {
    const before = accessLines(h).filter((l) => l['status_code'] === 499).length;
    // Half a body, then gone.
    for (let i = 0; i < 30; i++) {
      const s = await open(port);
      s.on('error', () => undefined);
      const body = chatBody('ab-agg');
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, body.length >> 1)}`,
      );
      s.destroy();
    }
    // A long stream in each mode, dropped after its first bytes.
    const engines = { 'ab-agg': ['agg'], 'ab-pd': ['pd-d'], 'ab-epd': ['epd-d'] } as const;
    const prefillsBefore = prefills();
    for (const [model, decoders] of Object.entries(engines)) {
      const abortedBefore = abortedAt([...decoders]);
      for (let i = 0; i < 5; i++) {
        const abort = new AbortController();
        const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: chatBody(model, { stream: true, max_tokens: 2000 }),
          signal: abort.signal,
        });
        expect(res.status).toBe(200);
        expect((await (res.body as ReadableStream<Uint8Array>).getReader().read()).done).toBe(false);
        abort.abort();
      }
      await waitFor(() => abortedAt([...decoders]) >= abortedBefore + 5, { what: `${model}: the decode legs aborted` });
    }
    // The PD and EPD streams ran their prefill leg before their decode streamed.
    expect(prefills()).toEqual({ pd: prefillsBefore.pd + 5, epd: prefillsBefore.epd + 5 });
    await waitFor(() => accessLines(h).filter((l) => l['status_code'] === 499).length >= before + 15, { what: '499 access lines' });
    await waitFor(async () => (await metric('triad_gateway_active_streams')) === 0, { what: 'no stream left open' });
    await served(6);
  });

  it('keeps serving while streaming clients never read, and aborts their legs once they go', async () => {
    const abortedBefore = abortedAt(['agg']);
    const body = chatBody('ab-agg', { stream: true, max_tokens: 20_000 });
    for (let i = 0; i < 10; i++) {
      const s = await open(port);
      s.on('error', () => undefined);
      // Never reads: the socket is paused, so the kernel buffers fill and the gateway has to hold the engine back.
      s.pause();
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      );
      sockets.push(s);
    }
    await waitFor(async () => (await metric('triad_gateway_active_streams')) === 10, { what: '10 streams open' });
    await served(6);
    for (const s of sockets.splice(0)) s.destroy();
    await waitFor(() => abortedAt(['agg']) >= abortedBefore + 10, { what: 'the engine legs of the stalled streams aborted' });
    await waitFor(async () => (await metric('triad_gateway_active_streams')) === 0, { what: 'no stream left open' });
  });

  it('answers 20 oversized bodies sent at once with 413s clients can read, and serves others', async () => {
    const big = chatBody('ab-agg', { filler: 'x'.repeat(BODY_LIMIT * 2) });
    const [answers] = await Promise.all([
      Promise.all(
        Array.from({ length: 20 }, async () => {
          const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: big,
          });
          return { status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code };
        }),
      ),
      served(6),
    ]);
    expect(answers).toEqual(answers.map(() => ({ status: 413, code: 'GATEWAY_BODY_TOO_LARGE' })));
  });

  it('answers pipelined requests, then the garbage after them with an OpenAI-shaped 400, and closes', async () => {
    const body = chatBody('ab-agg');
    const valid = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    const raw = await exchange(
      port,
      Buffer.concat([
        Buffer.from(`GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n${valid}`),
        Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]),
        Buffer.from('\r\n\r\n'),
      ]),
    );
    expect(statuses(raw)).toEqual([200, 200, 400]);
    const last = raw.slice(raw.lastIndexOf('HTTP/1.1 400'));
    expect(JSON.parse(last.slice(last.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: { type: 'invalid_request_error', code: 'GATEWAY_BAD_REQUEST' },
    });
    // A TLS ClientHello and plain binary noise on their own.
    for (const junk of [
      Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03]),
      Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 37) % 256)),
    ]) {
      expect(statuses(await exchange(port, junk))).toEqual([400]);
    }
    await served(3);
  });

  it('counted no unexpected error through all of it, and still serves', async () => {
    expect(await unexpectedErrors(h)).toBe(0);
    expect(rejections.seen).toEqual([]);
    expect((await fetch(`${h.gateway.url.replace(/\/$/, '')}/healthz`)).status).toBe(200);
    await served(3);
  });
});
