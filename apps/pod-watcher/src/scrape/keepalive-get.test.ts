import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { GetError, KeepAliveGet } from './keepalive-get';

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
});
