import { createServer, type Server } from 'node:net';
import { freePort } from './free-port';

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

describe('freePort', () => {
  const servers: Server[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((done) => s.close(done))));
  });

  it('hands out distinct ports below the ephemeral range, each one bindable while the others are held', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 40; i++) {
      const port = await freePort();
      ports.push(port);
      // held open, so a port handed out twice would fail to bind here
      servers.push(await listen(port));
    }
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(20_000);
      expect(port).toBeLessThan(32_768);
    }
  });
});
