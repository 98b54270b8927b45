import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { EndpointRef } from '@triad/bus';
import { IDLE_CLOSE_RACE_MS } from '@triad/connectors';
import { waitFor } from '@triad/testing';
import type { SimEngineHandle } from '@triad/engine-sim';
import { startHarness, type Harness } from './support/harness';

// The keep-alive race: an engine closes an idle kept-alive socket just as the gateway writes the next request on
// it. The engine below does that on purpose, at the one moment that matters: when a request arrives on a socket
// that already carried one, it closes the socket without answering (a reset, or a plain close), as an idle timeout
// firing at that instant would; the request was never answered. The gateway sends such a request again, once, on
// a new connection, and only when the socket had sat idle long enough to meet an engine's idle timeout
// (IDLE_CLOSE_RACE_MS) and nothing came back for it. A socket reused at once and then closed was closed by an
// engine that read the request (a crash): that is not sent to it again.

const MODEL = 'Qwen/Qwen2.5-0.5B';

interface Arrival {
  readonly id: string;
  /** 1 for the first request on its connection. */
  readonly onSocket: number;
  readonly connection: number;
}

/** What the engine does with a request, by the client's x-request-id prefix (the gateway forwards it). */
type Behaviour = 'answer' | 'reset-if-reused' | 'close-if-reused' | 'reset-always' | 'reset-after-head-if-reused';

interface RacingEngine {
  readonly server: Server;
  readonly port: number;
  readonly arrivals: Arrival[];
  /** performance.now() of its last answer. */
  readonly lastAnswerAt: () => number;
}

function completion(id: string): string {
  return JSON.stringify({
    id: `chatcmpl-${id}`,
    object: 'chat.completion',
    created: 0,
    model: MODEL,
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  });
}

async function startRacingEngine(): Promise<RacingEngine> {
  const arrivals: Arrival[] = [];
  let lastAnswerAt = 0;
  const perSocket = new WeakMap<Socket, { n: number; connection: number }>();
  let connections = 0;
  const server = createServer({ keepAliveTimeout: 60_000 }, (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    let seen = perSocket.get(socket);
    if (seen === undefined) {
      seen = { n: 0, connection: ++connections };
      perSocket.set(socket, seen);
    }
    seen.n++;
    const id = String(req.headers['x-request-id'] ?? '');
    arrivals.push({ id, onSocket: seen.n, connection: seen.connection });
    const behaviour = id.split('.')[0] as Behaviour;
    const reused = seen.n > 1;
    req.resume();
    req.on('end', () => {
      if (behaviour === 'reset-always' || (behaviour === 'reset-if-reused' && reused)) return socket.resetAndDestroy();
      if (behaviour === 'close-if-reused' && reused) return socket.destroy();
      if (behaviour === 'reset-after-head-if-reused' && reused) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"id":');
        setImmediate(() => socket.resetAndDestroy());
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(completion(id), () => (lastAnswerAt = performance.now()));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, arrivals, lastAnswerAt: () => lastAnswerAt };
}

function closeServer(server: Server | undefined): Promise<void> {
  if (server === undefined) return Promise.resolve();
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

describe('gateway, an engine closing a kept-alive socket as a request is written on it', () => {
  let h: Harness;
  let engine: RacingEngine;
  let cold: RacingEngine;
  const refs: Record<string, EndpointRef> = {};

  async function chat(model: string, id: string): Promise<{ status: number; body: string }> {
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    return { status: res.status, body: await res.text() };
  }

  beforeAll(async () => {
    h = await startHarness();
    engine = await startRacingEngine();
    cold = await startRacingEngine();
    for (const [name, e] of [
      ['racing', engine],
      ['cold', cold],
    ] as const) {
      // No retries of the gateway's own: what is asserted is the one resend on a fresh connection.
      await h.putServer(name, {
        model: MODEL,
        inferenceEngine: 'vLLM',
        workloadSelector: { matchLabels: { app: name } },
        workloadPort: { port: e.port, protocol: 'http' },
        trafficPolicy: { retry: { attempts: 0, retryInterval: '100ms' } },
      });
      await h.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
      const sim = { host: '127.0.0.1', port: e.port, engine: 'vllm', model: MODEL } as SimEngineHandle;
      refs[name] = await h.putEndpoint(name, `${name}-0`, 'aggregated', sim);
    }
    h.decide = (r) => ({
      id: r.id,
      ok: true,
      mode: 'aggregated',
      encoders: [],
      attempts: [{ endpoint: refs[r.modelServer] }],
    });
    await h.waitForModel('racing');
    await h.waitForModel('cold');
  });
  afterAll(async () => {
    await h?.close();
    await closeServer(engine?.server);
    await closeServer(cold?.server);
  });

  const arrivalsOf = (e: RacingEngine, id: string) => e.arrivals.filter((a) => a.id === id);
  /** Lets the kept-alive socket sit unused past IDLE_CLOSE_RACE_MS (well inside the pool's 2.5 s keep-alive). */
  const idle = (e: RacingEngine) =>
    waitFor(() => performance.now() - e.lastAnswerAt() >= IDLE_CLOSE_RACE_MS + 250, { what: 'the kept-alive socket idle', intervalMs: 50 });

  it.each([
    ['reset-if-reused', 'reset (ECONNRESET)'],
    ['close-if-reused', 'close (FIN: "other side closed")'],
  ])('sends a request whose kept-alive socket the engine %s again on a new connection, and answers it', async (behaviour) => {
    const warm = await chat('racing', `answer.warm-${behaviour}`);
    expect(warm.status).toBe(200);
    await idle(engine);
    const res = await chat('racing', `${behaviour}.1`);
    expect(res.status).toBe(200);
    expect((JSON.parse(res.body) as { id: string }).id).toBe(`chatcmpl-${behaviour}.1`);
    // First on the kept-alive socket the warm-up used (closed under it), then once on a connection of its own.
    const [first, again, ...more] = arrivalsOf(engine, `${behaviour}.1`);
    expect(first?.onSocket).toBeGreaterThan(1);
    expect(again?.onSocket).toBe(1);
    expect(again?.connection).not.toBe(first?.connection);
    expect(more).toHaveLength(0);
  });

  it('does not send again a request whose socket was reused at once and then reset (the engine read it)', async () => {
    await chat('racing', 'answer.warm-busy');
    const res = await chat('racing', 'reset-if-reused.busy');
    expect(res.status).toBe(502);
    const arrivals = arrivalsOf(engine, 'reset-if-reused.busy');
    expect(arrivals).toHaveLength(1);
    expect(arrivals[0]?.onSocket).toBeGreaterThan(1);
  });

  it('does not send again a request that failed on a new connection (the engine did get it)', async () => {
    const res = await chat('cold', 'reset-always.1');
    expect(res.status).toBe(502);
    expect(arrivalsOf(cold, 'reset-always.1')).toEqual([{ id: 'reset-always.1', onSocket: 1, connection: 1 }]);
  });

  it('sends again only once: a second close on the new connection fails the request', async () => {
    await chat('racing', 'answer.warm-twice');
    await idle(engine);
    const res = await chat('racing', 'reset-always.2');
    expect(res.status).toBe(502);
    const arrivals = arrivalsOf(engine, 'reset-always.2');
    expect(arrivals.map((a) => a.onSocket > 1)).toEqual([true, false]);
  });

  it('does not send again a request the engine had started to answer before the socket closed', async () => {
    await chat('racing', 'answer.warm-head');
    await idle(engine);
    const res = await chat('racing', 'reset-after-head-if-reused.1');
    expect(res.status).toBe(502);
    const arrivals = arrivalsOf(engine, 'reset-after-head-if-reused.1');
    expect(arrivals).toHaveLength(1);
    expect(arrivals[0]?.onSocket).toBeGreaterThan(1);
  });
});
