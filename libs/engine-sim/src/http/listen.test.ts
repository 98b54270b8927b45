import { createServer, type Server } from 'node:net';
import { listen } from './listen';

describe('listen', () => {
  const servers: Server[] = [];
  afterAll(async () => {
    await Promise.all(servers.filter((s) => s.listening).map((s) => new Promise((done) => s.close(done))));
  });

  it('resolves with the port the kernel gave for port 0', async () => {
    const server = createServer();
    servers.push(server);
    const port = await listen(server, '127.0.0.1', 0);
    expect(port).toBeGreaterThan(0);
    expect(server.address()).toMatchObject({ address: '127.0.0.1', port });
  });

  it('rejects with EADDRINUSE when the port is taken, and the failed server takes no later error as unhandled', async () => {
    const holder = createServer();
    servers.push(holder);
    const port = await listen(holder, '127.0.0.1', 0);
    const second = createServer();
    servers.push(second);
    await expect(listen(second, '127.0.0.1', port)).rejects.toMatchObject({ code: 'EADDRINUSE' });
    expect(second.listening).toBe(false);
    // The same server can still be started elsewhere: the rejected attempt left no listener behind.
    const other = await listen(second, '127.0.0.1', 0);
    expect(other).not.toBe(port);
    expect(second.listenerCount('error')).toBe(0);
  });
});
