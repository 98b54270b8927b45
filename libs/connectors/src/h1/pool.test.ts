import { spawn, type ChildProcess } from 'node:child_process';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { Pool } from 'undici';
import type { SocketUse } from '../socket-reuse';
import { H1Pool, type H1Handler } from './pool';

// The gateway's own HTTP/1.1 client against real node:net and node:http servers. A raw net server says exactly
// what goes over the wire (the request's bytes, a malformed or hand-framed answer); node:http stands in for an engine.

/** Polls `check` until it holds (the tests wait for conditions, not for time). */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

interface Outcome {
  status: number;
  headers: string[];
  body: Buffer;
  chunks: Buffer[];
  uses: SocketUse[];
}

/** A handler that records what a request got; `settled` resolves with it or rejects with the request's error. */
function recorder(hooks: Partial<H1Handler> = {}): { handler: H1Handler; settled: Promise<Outcome>; outcome: Outcome } {
  const outcome: Outcome = { status: 0, headers: [], body: Buffer.alloc(0), chunks: [], uses: [] };
  let resolve!: (o: Outcome) => void;
  let reject!: (err: Error) => void;
  const settled = new Promise<Outcome>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  settled.catch(() => undefined);
  const handler: H1Handler = {
    onConnect: (abort) => hooks.onConnect?.(abort),
    socketAssigned: (use) => outcome.uses.push(use),
    onHeaders: (status, raw, resume, text) => {
      outcome.status = status;
      outcome.headers = raw.map(String);
      return hooks.onHeaders?.(status, raw, resume, text) ?? true;
    },
    onData: (chunk) => {
      outcome.chunks.push(Buffer.from(chunk));
      return hooks.onData?.(chunk) ?? true;
    },
    onComplete: () => {
      outcome.body = Buffer.concat(outcome.chunks);
      resolve(outcome);
    },
    onError: (err) => reject(err),
  };
  return { handler, settled, outcome };
}

const post = (body = '{"a":1}', headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': 'r1' }) => ({
  path: '/v1/chat/completions',
  method: 'POST',
  headers,
  body,
});

/** A raw TCP server: `onRequest` gets each request's bytes (head and body, once complete) and its socket. */
interface RawServer {
  readonly server: Server;
  readonly origin: string;
  readonly sockets: Socket[];
  readonly requests: string[];
}

async function startRaw(onRequest: (socket: Socket, request: string, index: number) => void): Promise<RawServer> {
  const sockets: Socket[] = [];
  const requests: string[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    let pending = '';
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('latin1');
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        const request = pending.slice(0, end + 4 + length);
        pending = pending.slice(end + 4 + length);
        requests.push(request);
        onRequest(socket, request, requests.length - 1);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sockets, requests };
}

async function stopRaw(raw: RawServer | undefined): Promise<void> {
  if (raw === undefined) return;
  for (const s of raw.sockets) s.destroy();
  await new Promise<void>((resolve) => raw.server.close(() => resolve()));
}

async function stopHttp(server: HttpServer | undefined): Promise<void> {
  if (server === undefined) return;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

const OPTIONS = { keepAliveTimeoutMs: 30_000, connectTimeoutMs: 5_000 };

describe('H1Pool: the request on the wire', () => {
  let raw: RawServer;
  const pools: { close(): Promise<void> }[] = [];

  beforeAll(async () => {
    raw = await startRaw((socket) => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'));
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.close()));
    await stopRaw(raw);
  });

  it('writes the same bytes as undici: host first, connection: keep-alive, the headers in order, content-length last', async () => {
    const h1 = new H1Pool(raw.origin, OPTIONS);
    const undici = new Pool(raw.origin, { connections: 1, pipelining: 1 });
    pools.push(h1, undici);
    const request = post('{"model":"m","prompt":"héllo"}', {
      'content-type': 'application/json',
      'x-request-id': 'abc',
      traceparent: '00-1-2-01',
    });
    const { handler, settled } = recorder();
    h1.dispatch(request, handler);
    expect((await settled).body.toString()).toBe('ok');
    const viaUndici = recorder();
    undici.dispatch(request, viaUndici.handler);
    await viaUndici.settled;
    const [ours, theirs] = raw.requests.slice(-2);
    const port = new URL(raw.origin).port;
    expect(ours).toBe(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nconnection: keep-alive\r\ncontent-type: application/json\r\n` +
        `x-request-id: abc\r\ntraceparent: 00-1-2-01\r\ncontent-length: 31\r\n\r\n${Buffer.from('{"model":"m","prompt":"héllo"}').toString('latin1')}`,
    );
    expect(ours).toBe(theirs);
  });

  it('refuses a header value with a control character in the dispatch call, like undici, and connects nowhere', () => {
    const h1 = new H1Pool(raw.origin, OPTIONS);
    pools.push(h1);
    let error: (Error & { code?: string }) | undefined;
    h1.dispatch(post('{}', { 'x-request-id': 'a\r\nx-evil: 1' }), { onError: (err) => (error = err) });
    expect(error?.code).toBe('UND_ERR_INVALID_ARG');
    expect(error?.message).toBe('invalid x-request-id header');
    h1.dispatch(post('{}', { 'transfer-encoding': 'chunked' }), { onError: (err) => (error = err) });
    expect(error?.message).toBe('invalid transfer-encoding header');
    expect(h1.connections).toBe(0);
  });
});

describe('H1Pool: answers and their framings', () => {
  let raw: RawServer;
  let pool: H1Pool;
  /** What the raw server answers, by the request's path. */
  const answers: Record<string, string | ((socket: Socket) => void)> = {
    '/length': 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}',
    '/chunked': 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n',
    '/informational':
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
    '/no-content': 'HTTP/1.1 204 No Content\r\n\r\n',
    '/until-close': (socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end'),
    '/split': (socket) => {
      // The head and the body in pieces that cut through the head's end and a chunk's size line.
      const parts = [
        'HTTP/1.1 200 OK\r\ntransfer-encoding: chu',
        'nked\r\n\r',
        '\n3\r',
        '\nabc\r\n1',
        '0\r\n0123456789abcdef\r\n0\r\n\r\n',
      ];
      const next = (): void => {
        const part = parts.shift();
        if (part !== undefined) socket.write(part, () => setImmediate(next));
      };
      next();
    },
    '/bad-status': 'HTTP/1.1 2x0 OK\r\ncontent-length: 0\r\n\r\n',
    '/bad-chunk': 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n',
    '/bad-length': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok',
    '/length-and-chunked': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n',
    '/no-colon': 'HTTP/1.1 200 OK\r\nbroken header\r\ncontent-length: 0\r\n\r\n',
    '/cut-short': (socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this'),
    '/reset': (socket) => socket.resetAndDestroy(),
    '/excess': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n',
    '/close-hint': 'HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok',
    '/short-keep-alive-hint': 'HTTP/1.1 200 OK\r\nkeep-alive: timeout=2\r\ncontent-length: 2\r\n\r\nok',
    '/keep-alive-hint': 'HTTP/1.1 200 OK\r\nkeep-alive: timeout=5, max=100\r\ncontent-length: 2\r\n\r\nok',
  };

  beforeAll(async () => {
    raw = await startRaw((socket, request) => {
      const path = request.split(' ')[1];
      const answer = answers[path];
      if (typeof answer === 'string') socket.write(answer);
      else answer(socket);
    });
  });
  beforeEach(() => {
    pool = new H1Pool(raw.origin, OPTIONS);
  });
  afterEach(async () => {
    await pool.destroy();
  });
  afterAll(async () => {
    await stopRaw(raw);
  });

  async function send(path: string): Promise<Outcome> {
    const { handler, settled } = recorder();
    pool.dispatch({ path, method: 'POST', headers: {}, body: '{}' }, handler);
    return settled;
  }

  it('reads an answer with a length and keeps its connection for the next request', async () => {
    const first = await send('/length');
    expect(first.status).toBe(200);
    expect(first.headers).toEqual(['Content-Type', 'application/json', 'Content-Length', '11']);
    expect(first.body.toString()).toBe('{"ok":true}');
    expect(pool.idleConnections).toBe(1);
    const second = await send('/length');
    expect(second.uses[0].socket).toBe(first.uses[0].socket);
    expect(first.uses[0].reused).toBe(false);
    expect(second.uses[0].reused).toBe(true);
  });

  it('hands over each chunk of a chunked answer as its data, skips extensions and trailers, and keeps the connection', async () => {
    const got = await send('/chunked');
    expect(got.chunks.map(String)).toEqual(['hello', ' world']);
    expect(pool.idleConnections).toBe(1);
    expect((await send('/length')).uses[0].reused).toBe(true);
  });

  it('parses heads and chunk lines cut across reads', async () => {
    const got = await send('/split');
    expect(got.body.toString()).toBe('abc0123456789abcdef');
    expect(pool.idleConnections).toBe(1);
  });

  it('skips 1xx heads and hands over the final answer only', async () => {
    const got = await send('/informational');
    expect(got.status).toBe(200);
    expect(got.headers).toEqual(['content-length', '2']);
    expect(got.body.toString()).toBe('ok');
  });

  it('reads a 204 as an answer without a body', async () => {
    const got = await send('/no-content');
    expect(got.status).toBe(204);
    expect(got.body.length).toBe(0);
    expect(pool.idleConnections).toBe(1);
  });

  it('reads an answer without a length to the close of the connection, which is not kept', async () => {
    const got = await send('/until-close');
    expect(got.body.toString()).toBe('until the end');
    expect(pool.connections).toBe(0);
  });

  it.each([
    ['/bad-status', 'HPE_INVALID_CONSTANT'],
    ['/bad-chunk', 'HPE_INVALID_CHUNK_SIZE'],
    ['/bad-length', 'HPE_INVALID_CONTENT_LENGTH'],
    ['/length-and-chunked', 'HPE_UNEXPECTED_CONTENT_LENGTH'],
    ['/no-colon', 'HPE_INVALID_HEADER_TOKEN'],
  ])('fails the request on a malformed answer (%s) and closes its connection', async (path, code) => {
    await expect(send(path)).rejects.toMatchObject({ code });
    expect(pool.connections).toBe(0);
  });

  it('fails an answer cut short by the close with undici\'s "other side closed"', async () => {
    await expect(send('/cut-short')).rejects.toMatchObject({ code: 'UND_ERR_SOCKET', message: 'other side closed' });
  });

  it('passes a reset on as ECONNRESET', async () => {
    await expect(send('/reset')).rejects.toMatchObject({ code: 'ECONNRESET' });
  });

  it('does not keep a connection that delivered bytes after the answer', async () => {
    const got = await send('/excess');
    expect(got.body.toString()).toBe('ok');
    expect(pool.idleConnections).toBe(0);
  });

  it('does not keep a connection the answer closes (Connection: close)', async () => {
    const first = await send('/close-hint');
    expect(first.body.toString()).toBe('ok');
    expect(pool.idleConnections).toBe(0);
    expect((await send('/length')).uses[0].reused).toBe(false);
  });

  it('reads a Keep-Alive timeout hint less 2 s: 2 s leaves nothing and the connection goes, 5 s shortens the idle time', async () => {
    await send('/short-keep-alive-hint');
    expect(pool.idleConnections).toBe(0);
    const long = new H1Pool(raw.origin, { ...OPTIONS, keepAliveTimeoutMs: 60_000 });
    try {
      const { handler, settled } = recorder();
      long.dispatch({ path: '/keep-alive-hint', method: 'POST', headers: {}, body: '{}' }, handler);
      await settled;
      expect(long.idleConnections).toBe(1);
      // Retired after 3 s (5 s less the margin), long before the pool's 60 s (until gives up after 10 s).
      await until(() => long.connections === 0, 'the hinted idle time to retire the connection');
    } finally {
      await long.destroy();
    }
  });
});

describe('H1Pool: idle connections', () => {
  let raw: RawServer;

  beforeAll(async () => {
    raw = await startRaw((socket, request) => {
      const path = request.split(' ')[1];
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      if (path === '/then-bytes') setImmediate(() => socket.write('HTTP/1.1 200 OK\r\n'));
      if (path === '/then-end') setImmediate(() => socket.end());
    });
  });
  afterAll(async () => {
    await stopRaw(raw);
  });

  async function send(pool: H1Pool, path = '/'): Promise<Outcome> {
    const { handler, settled } = recorder();
    pool.dispatch({ path, method: 'POST', headers: {}, body: '{}' }, handler);
    return settled;
  }

  it('retires a connection idle for the keep-alive time, and the server sees it close', async () => {
    const pool = new H1Pool(raw.origin, { ...OPTIONS, keepAliveTimeoutMs: 200 });
    try {
      const sockets = raw.sockets.length;
      await send(pool);
      expect(pool.idleConnections).toBe(1);
      const serverSide = raw.sockets[sockets];
      const closed = once(serverSide, 'close');
      await until(() => pool.connections === 0, 'the idle connection to be retired');
      await closed;
      expect((await send(pool)).uses[0].reused).toBe(false);
    } finally {
      await pool.destroy();
    }
  });

  it.each(['/then-bytes', '/then-end'])('never reuses a connection that got data or an end while idle (%s)', async (path) => {
    const pool = new H1Pool(raw.origin, OPTIONS);
    try {
      const first = await send(pool, path);
      await until(() => first.uses[0].socket.destroyed, 'the idle socket to be closed');
      expect(pool.idleConnections).toBe(0);
      const second = await send(pool);
      expect(second.uses[0].reused).toBe(false);
      expect(second.uses[0].socket).not.toBe(first.uses[0].socket);
    } finally {
      await pool.destroy();
    }
  });

  it('hands the request its socket: how long it sat idle and its bytes read at the start', async () => {
    const pool = new H1Pool(raw.origin, OPTIONS);
    try {
      const first = await send(pool);
      const second = await send(pool);
      const use = second.uses[0];
      expect(use.reused).toBe(true);
      expect(use.idleMs).toBeGreaterThanOrEqual(0);
      expect(use.bytesReadAtStart).toBe(first.uses[0].socket.bytesRead - 40);
    } finally {
      await pool.destroy();
    }
  });

  it('sends on a connection of its own with dispatchFresh, never an idle one', async () => {
    const pool = new H1Pool(raw.origin, OPTIONS);
    try {
      await send(pool);
      const { handler, settled } = recorder();
      pool.dispatchFresh({ path: '/', method: 'POST', headers: {}, body: '{}' }, handler);
      expect((await settled).uses[0].reused).toBe(false);
      expect(pool.idleConnections).toBe(2);
    } finally {
      await pool.destroy();
    }
  });
});

describe('H1Pool: connecting', () => {
  let silent: ChildProcess | undefined;
  const held: Socket[] = [];

  afterAll(() => {
    for (const socket of held) socket.destroy();
    silent?.kill();
  });

  it('fails a refused connection with ECONNREFUSED', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const pool = new H1Pool(`http://127.0.0.1:${port}`, OPTIONS);
    const { handler, settled } = recorder();
    pool.dispatch(post(), handler);
    await expect(settled).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(pool.connections).toBe(0);
  });

  it("gives up connecting after connectTimeoutMs with undici's UND_ERR_CONNECT_TIMEOUT", async () => {
    // A listener whose process never accepts (its event loop is blocked) with a backlog of 1: the kernel completes
    // two handshakes (held below) and drops the next one, so the pool's connect hangs.
    silent = spawn(
      process.execPath,
      [
        '-e',
        "const s=require('net').createServer().listen({port:0,host:'127.0.0.1',backlog:1},()=>{process.stdout.write(String(s.address().port)+'\\n');Atomics.wait(new Int32Array(new SharedArrayBuffer(4)),0,0)})",
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const [line] = (await once(silent.stdout!, 'data')) as [Buffer];
    const port = Number(line.toString().trim());
    for (let i = 0; i < 2; i++) {
      const socket = connect(port, '127.0.0.1');
      held.push(socket);
      await once(socket, 'connect');
    }
    const pool = new H1Pool(`http://127.0.0.1:${port}`, { keepAliveTimeoutMs: 30_000, connectTimeoutMs: 150 });
    const { handler, settled } = recorder();
    pool.dispatch(post(), handler);
    await expect(settled).rejects.toMatchObject({ code: 'UND_ERR_CONNECT_TIMEOUT' });
    expect(pool.connections).toBe(0);
  });
});

describe('H1Pool: aborts, a slow reader, close and destroy', () => {
  let server: HttpServer;
  let origin: string;
  /** Server-side state of the streaming answers. */
  const streams: { res: ServerResponse; closed: boolean; blocked: boolean; bytes: number }[] = [];
  let requests = 0;

  beforeAll(async () => {
    server = createHttpServer({ keepAliveTimeout: 30_000 }, (req: IncomingMessage, res: ServerResponse) => {
      requests++;
      req.resume();
      req.on('end', () => {
        if (req.url === '/stream') {
          const state = { res, closed: false, blocked: false, bytes: 0 };
          streams.push(state);
          res.on('close', () => (state.closed = true));
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: first\n\n');
          return;
        }
        if (req.url === '/big') {
          // Written until node:http says the client does not read: the slow reader's pause reached the server.
          const state = { res, closed: false, blocked: false, bytes: 0 };
          streams.push(state);
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          const block = Buffer.alloc(64 * 1024, 97);
          let more = true;
          while (more) {
            more = res.write(block);
            state.bytes += block.length;
          }
          state.blocked = true;
          return;
        }
        res.writeHead(200, { 'content-length': '2' }).end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await stopHttp(server);
  });

  it('an abort mid-answer fails the request with its reason and closes the connection, which the server sees', async () => {
    const pool = new H1Pool(origin, OPTIONS);
    let abort!: (err?: Error) => void;
    const { handler, settled, outcome } = recorder({ onConnect: (a) => (abort = a) });
    pool.dispatch({ path: '/stream', method: 'POST', headers: {}, body: '{}' }, handler);
    await until(() => outcome.chunks.length > 0, 'the first event');
    const reason = new Error('client gone');
    abort(reason);
    await expect(settled).rejects.toBe(reason);
    const stream = streams[streams.length - 1];
    await until(() => stream.closed, 'the server to see the connection close');
    expect(pool.connections).toBe(0);
    await pool.destroy();
  });

  it('an abort before the write sends nothing and leaves the connection for the next request', async () => {
    const pool = new H1Pool(origin, OPTIONS);
    await recorderSend(pool, '/');
    const before = requests;
    const reason = new Error('gone before the write');
    const { handler, settled } = recorder({ onConnect: (abort) => abort(reason) });
    pool.dispatch({ path: '/', method: 'POST', headers: {}, body: '{}' }, handler);
    await expect(settled).rejects.toBe(reason);
    expect(pool.idleConnections).toBe(1);
    const next = await recorderSend(pool, '/');
    expect(next.uses[0].reused).toBe(true);
    expect(requests).toBe(before + 1);
    await pool.close();
  });

  it('a slow reader pauses the answer (onData returns false) until it resumes, then gets every byte', async () => {
    const pool = new H1Pool(origin, OPTIONS);
    let resume!: () => void;
    let paused = false;
    const { handler, settled, outcome } = recorder({
      onHeaders: (_s, _h, r) => {
        resume = r;
        return true;
      },
      onData: () => {
        paused = true;
        return false;
      },
    });
    pool.dispatch({ path: '/big', method: 'POST', headers: {}, body: '{}' }, handler);
    await until(() => paused, 'the first data');
    const stream = streams[streams.length - 1];
    await until(() => stream.blocked, 'the server to see the client not reading');
    // Nothing more was handed over while paused.
    expect(outcome.chunks).toHaveLength(1);
    const got = outcome.chunks[0].length;
    handler.onData = (chunk) => {
      outcome.chunks.push(Buffer.from(chunk));
      return true;
    };
    stream.res.end();
    resume();
    const done = await settled;
    expect(got).toBeLessThan(stream.bytes);
    expect(done.body.length).toBe(stream.bytes);
    expect(done.body.every((b) => b === 97)).toBe(true);
    await pool.close();
  });

  it('close lets a running request finish, then closes its connection; destroy fails the running one', async () => {
    const pool = new H1Pool(origin, OPTIONS);
    const running = recorder();
    pool.dispatch({ path: '/stream', method: 'POST', headers: {}, body: '{}' }, running.handler);
    await until(() => running.outcome.chunks.length > 0, 'the first event');
    let closed = false;
    const closing = pool.close().then(() => (closed = true));
    // Still open while the answer runs.
    expect(pool.connections).toBe(1);
    streams[streams.length - 1].res.end('data: last\n\n');
    const done = await running.settled;
    expect(done.chunks.map(String).join('')).toContain('data: last');
    await closing;
    expect(closed).toBe(true);
    expect(pool.connections).toBe(0);

    const other = new H1Pool(origin, OPTIONS);
    const cut = recorder();
    other.dispatch({ path: '/stream', method: 'POST', headers: {}, body: '{}' }, cut.handler);
    await until(() => cut.outcome.chunks.length > 0, 'the first event');
    await other.destroy();
    await expect(cut.settled).rejects.toMatchObject({ code: 'UND_ERR_DESTROYED' });
    expect(other.connections).toBe(0);
  });

  async function recorderSend(pool: H1Pool, path: string): Promise<Outcome> {
    const { handler, settled } = recorder();
    pool.dispatch({ path, method: 'POST', headers: {}, body: '{}' }, handler);
    return settled;
  }
});
