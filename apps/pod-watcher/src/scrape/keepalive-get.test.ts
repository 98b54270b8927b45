import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { BodyPool } from './body-pool';
import { AnswerParser, GetError, KeepAliveGet } from './keepalive-get';

const opts = { timeoutMs: 2000, maxBodyBytes: 1024 * 1024, accept: 'text/plain' };

function listen(server: Server | TcpServer): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

describe('keep-alive GET for scrapes', () => {
  let server: Server;
  let raw: TcpServer;
  let port: number;
  let rawPort: number;
  let connections = 0;
  let rawReply = '';
  const client = new KeepAliveGet({ keepAliveMs: 30_000 });

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/length') res.writeHead(200, { 'content-length': '5' }).end('hello');
      else if (req.url === '/chunked') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('vllm:a 1\n');
        setTimeout(() => res.end('vllm:b 2\n'), 20);
      } else if (req.url === '/big') res.end('x'.repeat(2 * 1024 * 1024));
      else if (req.url === '/hang') return;
      else if (req.url === '/auth') res.end(req.headers['authorization'] ?? '(none)');
      else res.writeHead(404).end('no');
    });
    server.on('connection', () => {
      connections += 1;
    });
    port = await listen(server);
    raw = createTcpServer((s) => s.once('data', () => s.end(rawReply)));
    rawPort = await listen(raw);
  });
  afterAll(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await new Promise((r) => raw.close(r));
  });

  it('reads Content-Length and chunked bodies over one kept-alive connection', async () => {
    const before = connections;
    const a = await client.get(`http://127.0.0.1:${port}/length`, opts);
    expect([a.status, a.body.toString()]).toEqual([200, 'hello']);
    const b = await client.get(`http://127.0.0.1:${port}/chunked`, opts);
    expect([b.status, b.body.toString()]).toEqual([200, 'vllm:a 1\nvllm:b 2\n']);
    const c = await client.get(`http://127.0.0.1:${port}/missing`, opts);
    expect([c.status, c.body.toString()]).toEqual([404, 'no']);
    expect(connections - before).toBe(1);
  });

  it('sends an Authorization value on the request that has one only (the cached head of the path stays without)', async () => {
    const url = `http://127.0.0.1:${port}/auth`;
    expect((await client.get(url, opts)).body.toString()).toBe('(none)');
    expect((await client.get(url, { ...opts, authorization: 'Bearer k-1' })).body.toString()).toBe('Bearer k-1');
    expect((await client.get(url, { ...opts, authorization: 'Bearer k-2' })).body.toString()).toBe('Bearer k-2');
    expect((await client.get(url, opts)).body.toString()).toBe('(none)');
    // A value that would forge a header is not written.
    await expect(client.get(url, { ...opts, authorization: 'Bearer k\r\nX-Forged: 1' })).rejects.toMatchObject({ kind: 'protocol' });
  });

  it('sends concurrent requests to one engine in turn over one connection', async () => {
    const before = connections;
    const [a, b] = await Promise.all([
      client.get(`http://127.0.0.1:${port}/chunked`, opts),
      client.get(`http://127.0.0.1:${port}/length`, opts),
    ]);
    expect([a.body.toString(), b.body.toString()]).toEqual(['vllm:a 1\nvllm:b 2\n', 'hello']);
    expect(connections - before).toBeLessThanOrEqual(1);
  });

  it('asks again on a new connection when the engine closed the kept-alive one', async () => {
    await client.get(`http://127.0.0.1:${port}/length`, opts);
    server.closeIdleConnections();
    const again = await client.get(`http://127.0.0.1:${port}/length`, opts);
    expect(again.body.toString()).toBe('hello');
  });

  it('forgets an engine: its idle connection is closed, the next request opens a new one', async () => {
    await client.get(`http://127.0.0.1:${port}/length`, opts);
    const before = connections;
    client.forget(`http://127.0.0.1:${port}`);
    await client.get(`http://127.0.0.1:${port}/length`, opts);
    expect(connections - before).toBe(1);
  });

  it('reads an answer delimited by the end of the connection (HTTP/1.0)', async () => {
    rawReply = 'HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nvllm:c 3\n';
    const r = await client.get(`http://127.0.0.1:${rawPort}/metrics`, opts);
    expect(r.body.toString()).toBe('vllm:c 3\n');
  });

  it('fails with a kind: timeout, too large, refused, not HTTP', async () => {
    const kind = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: GetError) => e.kind,
      );
    expect(await kind(client.get(`http://127.0.0.1:${port}/hang`, { ...opts, timeoutMs: 100 }))).toBe('timeout');
    expect(await kind(client.get(`http://127.0.0.1:${port}/big`, opts))).toBe('too-large');
    const closed = createTcpServer();
    const closedPort = await listen(closed);
    await new Promise((r) => closed.close(r));
    expect(await kind(client.get(`http://127.0.0.1:${closedPort}/metrics`, opts))).toBe('connect');
    rawReply = '<html>not http</html>\r\n\r\n';
    expect(await kind(client.get(`http://127.0.0.1:${rawPort}/metrics`, opts))).toBe('protocol');
  });

  it('times out a request queued behind a hung one with its own budget, and the engine is asked again afterwards', async () => {
    const failed: string[] = [];
    const note = (what: string) => (e: GetError) => failed.push(`${what}:${e.kind}:${/queued/.test(e.message) ? 'queued' : 'wire'}`);
    const hung = client.get(`http://127.0.0.1:${port}/hang`, { ...opts, timeoutMs: 400 }).catch(note('hung'));
    const queued = client.get(`http://127.0.0.1:${port}/length`, { ...opts, timeoutMs: 100 }).catch(note('queued'));
    await Promise.all([hung, queued]);
    // The queued one ran out first, while the hung one still held the engine's socket.
    expect(failed).toEqual(['queued:timeout:queued', 'hung:timeout:wire']);
    const again = await client.get(`http://127.0.0.1:${port}/length`, opts);
    expect(again.body.toString()).toBe('hello');
  });

  it('frames one answer after another on a kept-alive connection, whatever framing came before', async () => {
    const before = connections;
    for (const path of ['/chunked', '/length', '/missing', '/chunked', '/chunked', '/length']) {
      const r = await client.get(`http://127.0.0.1:${port}${path}`, opts);
      const expected = path === '/chunked' ? [200, 'vllm:a 1\nvllm:b 2\n'] : path === '/length' ? [200, 'hello'] : [404, 'no'];
      expect([path, r.status, r.body.toString()]).toEqual([path, ...expected]);
    }
    expect(connections - before).toBeLessThanOrEqual(1);
  });
});

describe('answer framing', () => {
  const chunked = Buffer.from(
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9;ext=1\r\nvllm:a 1\n\r\n10\r\nvllm:bb 22\nvllm:\r\n0\r\n\r\n',
    'latin1',
  );
  const sized = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\nhello, world', 'latin1');

  /** Feeds `answer` in pieces cut at `cuts`, through one reused read buffer as the sockets do. */
  function feed(answer: Buffer, cuts: number[], pool = new BodyPool()): { done: boolean; body: string; status: number } {
    const parser = new AnswerParser(1024, pool);
    const shared = Buffer.alloc(answer.length);
    let done = false;
    let from = 0;
    for (const to of [...cuts, answer.length]) {
      answer.copy(shared, 0, from, to);
      shared.fill(0x7e, to - from);
      done = parser.push(shared, to - from);
      from = to;
      if (done) break;
    }
    const out = { done, body: parser.body().toString('latin1'), status: parser.status };
    parser.release();
    return out;
  }

  it('reads chunked and sized answers cut at any byte, the read buffer reused between reads', () => {
    for (const [answer, body] of [
      [chunked, 'vllm:a 1\nvllm:bb 22\nvllm:'],
      [sized, 'hello, world'],
    ] as const) {
      expect(feed(answer, [])).toEqual({ done: true, body, status: 200 });
      for (let cut = 1; cut < answer.length; cut++) expect([cut, feed(answer, [cut])]).toEqual([cut, { done: true, body, status: 200 }]);
      const everyByte = Array.from({ length: answer.length - 1 }, (_, i) => i + 1);
      expect(feed(answer, everyByte)).toEqual({ done: true, body, status: 200 });
    }
  });

  it('reads the framing headers in any case, and Connection: close', () => {
    const parser = new AnswerParser(1024, new BodyPool());
    const answer = Buffer.from(
      'HTTP/1.1 201 Created\r\nX-Content-Length: 9\r\nCONTENT-LENGTH : 3\r\nConnection: Close\r\n\r\nabc',
      'latin1',
    );
    expect(parser.push(answer, answer.length)).toBe(true);
    expect([parser.status, parser.keepAlive, parser.body().toString()]).toEqual([201, false, 'abc']);
    parser.release();
    const old = Buffer.from('HTTP/1.0 200 OK\r\nconnection: keep-alive\r\nTransfer-Encoding: Chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n', 'latin1');
    const p2 = new AnswerParser(1024, new BodyPool());
    expect(p2.push(old, old.length)).toBe(true);
    expect([p2.status, p2.keepAlive, p2.body().toString()]).toEqual([200, true, 'x']);
  });

  it("reuses body buffers: a body read and released is the next answer's memory", () => {
    const pool = new BodyPool();
    feed(sized, [20], pool);
    expect(pool.size).toBe(1);
    feed(chunked, [], pool);
    expect(pool.size).toBe(1);
  });
});

describe('read: the body lent to a reader', () => {
  let server: Server;
  let port: number;
  const client = new KeepAliveGet({ keepAliveMs: 30_000 });
  beforeAll(async () => {
    server = createServer((req, res) => res.end(req.url === '/a' ? 'aaaa' : 'bb'));
    port = await listen(server);
  });
  afterAll(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it("resolves to the reader's value, rejects with what it throws, and lends the same memory again", async () => {
    let first: Buffer | undefined;
    const text = await client.read(`http://127.0.0.1:${port}/a`, opts, (status, body) => {
      first = body;
      return `${status} ${body.toString()}`;
    });
    expect(text).toBe('200 aaaa');
    const boom = new Error('reader failed');
    await expect(
      client.read(`http://127.0.0.1:${port}/b`, opts, () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    let second: Buffer | undefined;
    await client.read(`http://127.0.0.1:${port}/b`, opts, (_s, body) => {
      second = body;
    });
    expect(second?.buffer).toBe(first?.buffer);
    // get() hands out a copy that stays.
    const kept = await client.get(`http://127.0.0.1:${port}/a`, opts);
    await client.read(`http://127.0.0.1:${port}/b`, opts, () => undefined);
    expect(kept.body.toString()).toBe('aaaa');
  });
});
