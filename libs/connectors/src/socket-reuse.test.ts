import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, type Dispatcher } from 'undici';
import { expectSocket, socketFreed, type SocketUse, type SocketUseListener } from './socket-reuse';

/** A keep-alive HTTP server answering 200 to everything. */
async function startServer(): Promise<{ server: Server; origin: string }> {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-length': '2' }).end('ok'));
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** One GET on `client`; `announce` runs in the handler's onRequestStart, as a leg's does. */
function get(client: Client, announce?: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: () => announce?.(),
      onResponseStart: () => undefined,
      onResponseData: () => undefined,
      onResponseEnd: () => resolve(),
      onResponseError: (_controller, err) => reject(err),
    };
    client.dispatch({ path: '/', method: 'GET' }, handler);
  });
}

describe('socket reuse: which socket a leg was written on, and whether it carried a request before', () => {
  let a: { server: Server; origin: string };
  let b: { server: Server; origin: string };
  let clientA: Client;
  let clientB: Client;

  beforeAll(async () => {
    a = await startServer();
    b = await startServer();
    clientA = new Client(a.origin);
    clientB = new Client(b.origin);
  });

  afterAll(async () => {
    await Promise.all([clientA.close(), clientB.close()]);
    for (const s of [a.server, b.server]) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });

  it('tells the listener its socket: new at first, reused after a request on it settled', async () => {
    const uses: SocketUse[] = [];
    const listener: SocketUseListener = { socketAssigned: (use) => uses.push(use) };
    await get(clientA, () => expectSocket(listener, a.origin));
    expect(uses).toHaveLength(1);
    expect(uses[0]?.reused).toBe(false);
    expect(uses[0]?.idleMs).toBe(0);
    socketFreed(uses[0].socket);
    await get(clientA, () => expectSocket(listener, a.origin));
    expect(uses).toHaveLength(2);
    expect(uses[1]?.socket).toBe(uses[0]?.socket);
    expect(uses[1]?.reused).toBe(true);
    expect(uses[1]?.idleMs).toBeGreaterThanOrEqual(0);
  });

  it("another client's request to another origin is never taken for the announced leg's", async () => {
    const uses: SocketUse[] = [];
    const listener: SocketUseListener = { socketAssigned: (use) => uses.push(use) };
    // A leg announced itself and its write did not happen (aborted in between): a request elsewhere publishes next.
    expectSocket(listener, a.origin);
    await get(clientB);
    expect(uses).toEqual([]);
    // The announced listener still gets its own request's socket when it is written.
    await get(clientA);
    expect(uses).toHaveLength(1);
    expect(uses[0]?.socket.remotePort).toBe(Number(new URL(a.origin).port));
  });
});
