import { createServer, type Server } from 'node:net';
import { freePort, spawnTriad, startNatsServer, waitFor, type NatsServerHandle, type TriadChild } from '@triad/testing';

// A service that cannot start must end its process: alive but never ready, it would hold its ops port and NATS
// connection and no liveness probe would restart it.

let nats: NatsServerHandle;
let squatter: Server;
let takenPort = 0;
let child: TriadChild | undefined;

beforeAll(async () => {
  nats = await startNatsServer();
  squatter = createServer();
  await new Promise<void>((done) => squatter.listen(0, '127.0.0.1', done));
  takenPort = (squatter.address() as { port: number }).port;
});

afterAll(async () => {
  await child?.stop();
  await new Promise((done) => squatter.close(done));
  await nats.close();
});

describe('a service that fails to start', () => {
  it('exits with code 1 and says why when the gateway port is taken', async () => {
    const opsPort = await freePort();
    child = spawnTriad(
      ['gateway', '--nats', nats.url, '--host', '127.0.0.1', '--port', String(takenPort), '--metrics-port', String(opsPort)],
      {
        TRIAD_LOG_LEVEL: 'warn',
      },
    );
    const proc = child.process;
    const code = await waitFor(() => proc.exitCode ?? undefined, {
      timeoutMs: 30_000,
      what: `the gateway to exit; output:\n${child.output()}`,
    });
    expect(code).toBe(1);
    expect(child.output()).toContain('EADDRINUSE');
  });
});
