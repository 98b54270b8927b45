import type { Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { waitFor } from '@triad/testing';
import { ClientConnectionCap } from './client-connection-cap';
import { createGatewayServer, tooManyConnectionsResponse } from './http-layer';

// The cap on a gateway HTTP server of its own (no NATS, no engines), where the server side of each connection can
// be watched: how many the cap counts per address, and when the gateway's end of a refused one closes.

const LINGER_MS = 200;

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

function open(port: number, localAddress: string, allowHalfOpen = false): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress, allowHalfOpen }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** What the server sent until the connection closed (read on, or a paused socket never sees the close). */
function untilClosed(socket: Socket): Promise<string> {
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  return new Promise((resolve) => socket.once('close', () => resolve(received)));
}

describe('ClientConnectionCap', () => {
  const refusals: { address: string; first: boolean }[] = [];
  const cap = new ClientConnectionCap({
    maxPerClient: 2,
    answer: tooManyConnectionsResponse(2),
    lingerMs: LINGER_MS,
    onRefused: (address, first) => refusals.push({ address, first }),
  });
  const server = createGatewayServer((_req, res) => res.end('ok'), {
    bodyLimit: 1024,
    discardLimit: 1024,
    keepAliveTimeoutMs: 5_000,
    headersTimeoutMs: 5_000,
    requestTimeoutMs: 5_000,
    connectionCap: cap,
    draining: () => false,
  });
  /** When the gateway's end of each connection closed, by the client's local port. */
  const serverClosed = new Map<number, number>();
  server.on('connection', (socket: Socket) => {
    const clientPort = socket.remotePort ?? -1;
    socket.once('close', () => serverClosed.set(clientPort, Date.now()));
  });
  let port = 0;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    port = await listen(server);
  });
  afterEach(() => {
    for (const s of sockets.splice(0)) s.destroy();
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('counts open connections per address, refuses over the cap (logging once per episode), and releases on close', async () => {
    const a1 = await open(port, '127.0.1.1');
    const a2 = await open(port, '127.0.1.1');
    sockets.push(a1, a2);
    await waitFor(() => cap.openFrom('127.0.1.1') === 2, { what: 'two connections counted for 127.0.1.1' });
    for (let i = 0; i < 2; i++) {
      const extra = await open(port, '127.0.1.1');
      sockets.push(extra);
      expect(await untilClosed(extra)).toMatch(/^HTTP\/1\.1 429 /);
    }
    expect(refusals).toEqual([
      { address: '127.0.1.1', first: true },
      { address: '127.0.1.1', first: false },
    ]);
    // Refused connections are not counted; another address has its own count.
    expect(cap.openFrom('127.0.1.1')).toBe(2);
    sockets.push(await open(port, '127.0.1.2'));
    await waitFor(() => cap.openFrom('127.0.1.2') === 1, { what: 'one connection counted for 127.0.1.2' });
    a1.destroy();
    await waitFor(() => cap.openFrom('127.0.1.1') === 1, { what: 'the closed connection released' });
    a2.destroy();
    await waitFor(() => cap.openFrom('127.0.1.1') === 0, { what: 'both released' });
    // The address held nothing in between: its next refusal is logged again.
    const again = await Promise.all([open(port, '127.0.1.1'), open(port, '127.0.1.1')]);
    sockets.push(...again);
    await waitFor(() => cap.openFrom('127.0.1.1') === 2, { what: 'two connections counted again' });
    const extra = await open(port, '127.0.1.1');
    sockets.push(extra);
    expect(await untilClosed(extra)).toMatch(/^HTTP\/1\.1 429 /);
    expect(refusals.at(-1)).toEqual({ address: '127.0.1.1', first: true });
  });

  it(`closes its end of a refused connection the client keeps half-open after ${LINGER_MS} ms idle`, async () => {
    const held = await Promise.all([open(port, '127.0.1.3'), open(port, '127.0.1.3')]);
    sockets.push(...held);
    await waitFor(() => cap.openFrom('127.0.1.3') === 2, { what: 'two connections counted for 127.0.1.3' });
    // A complete request (so node's header timeout no longer applies to it), then the client never closes.
    const extra = await open(port, '127.0.1.3', true);
    sockets.push(extra);
    let received = '';
    extra.on('data', (d: Buffer) => (received += d.toString('latin1')));
    const endedAt = await new Promise<number>((resolve) => {
      extra.once('end', () => resolve(Date.now()));
      extra.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    });
    expect(received).toMatch(/^HTTP\/1\.1 429 /);
    const localPort = extra.localPort ?? 0;
    const closedAt = await waitFor(() => serverClosed.get(localPort), { what: "the gateway's end of the refused connection closed" });
    expect(closedAt - endedAt).toBeGreaterThanOrEqual(LINGER_MS - 50);
    // The request it sent was dropped, not answered.
    expect(received.match(/HTTP\/1\.1 /g)).toHaveLength(1);
  });

  it('counts nothing with a cap of 0', async () => {
    const off = new ClientConnectionCap({ maxPerClient: 0, answer: '', lingerMs: 1, onRefused: () => undefined });
    const plain = createGatewayServer((_req, res) => res.end('ok'), {
      bodyLimit: 1024,
      discardLimit: 1024,
      keepAliveTimeoutMs: 5_000,
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 5_000,
      connectionCap: off,
      draining: () => false,
    });
    const plainPort = await listen(plain);
    try {
      const many = await Promise.all(Array.from({ length: 5 }, () => open(plainPort, '127.0.1.4')));
      sockets.push(...many);
      const answers = await Promise.all(
        many.map(
          (s) =>
            new Promise<string>((resolve) => {
              s.once('data', (d: Buffer) => resolve(d.toString('latin1')));
              s.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
            }),
        ),
      );
      expect(answers.every((a) => a.startsWith('HTTP/1.1 200 '))).toBe(true);
      expect(off.openFrom('127.0.1.4')).toBe(0);
    } finally {
      plain.closeAllConnections();
      await new Promise((resolve) => plain.close(resolve));
    }
  });
});
