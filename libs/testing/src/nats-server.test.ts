import { connect } from '@nats-io/transport-node';
import { startNatsServer, type NatsServerHandle } from './nats-server';
import { existsSync } from 'node:fs';

describe('startNatsServer', () => {
  let server: NatsServerHandle;
  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it('runs a JetStream server on a random port that is not 4222', async () => {
    expect(server.port).not.toBe(4222);
    const nc = await connect({ servers: server.url });
    expect(nc.info?.jetstream).toBe(true);
    await nc.close();
  });

  it('stops and starts again on the same port, telling the running process id', async () => {
    const first = server.pid;
    expect(first).toBeGreaterThan(0);
    await server.stop();
    expect(server.pid).toBeUndefined();
    await expect(connect({ servers: server.url, maxReconnectAttempts: 0, reconnect: false })).rejects.toThrow();
    await server.start();
    expect(server.pid).toBeGreaterThan(0);
    expect(server.pid).not.toBe(first);
    const nc = await connect({ servers: server.url });
    expect(nc.isClosed()).toBe(false);
    await nc.close();
  });

  it('removes its store on close', async () => {
    const other = await startNatsServer();
    expect(existsSync(other.storeDir)).toBe(true);
    await other.close();
    expect(existsSync(other.storeDir)).toBe(false);
  });

  it('names the binary when it is missing', async () => {
    const saved = process.env['NATS_SERVER_BIN'];
    process.env['NATS_SERVER_BIN'] = '/nonexistent/nats-server';
    try {
      await expect(startNatsServer()).rejects.toThrow("nats-server binary '/nonexistent/nats-server' not found");
    } finally {
      if (saved === undefined) delete process.env['NATS_SERVER_BIN'];
      else process.env['NATS_SERVER_BIN'] = saved;
    }
  });
});
