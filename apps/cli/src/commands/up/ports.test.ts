import { createServer, type Server } from 'node:net';
import { assertPortFree, freeLoopbackPort } from './ports';
import { StartupError } from './startup-error';

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

describe('local stack ports', () => {
  const held: Server[] = [];
  afterAll(async () => {
    await Promise.all(held.map((s) => new Promise((done) => s.close(done))));
  });

  it('picks free loopback ports below the ephemeral range', async () => {
    for (let i = 0; i < 10; i++) {
      const port = await freeLoopbackPort();
      expect(port).toBeGreaterThanOrEqual(20_000);
      expect(port).toBeLessThan(32_768);
      held.push(await listen(port));
    }
  });

  it('says which port is taken and how to find its holder', async () => {
    const port = await freeLoopbackPort();
    held.push(await listen(port));
    const failure = assertPortFree('127.0.0.1', port, 'the gateway');
    await expect(failure).rejects.toBeInstanceOf(StartupError);
    await expect(failure).rejects.toThrow(`127.0.0.1:${port} is already in use, so the gateway cannot listen on it`);
  });
});
