import { createServer, connect, type Server, type Socket } from 'node:net';
import { freePort } from '@triad/testing';
import { waitForDependency } from '../src';
import { captureLogger } from '../src/testing';

/** One TCP connection attempt to 127.0.0.1:port: resolves with the socket, rejects when refused. */
function dial(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

describe('waitForDependency', () => {
  let server: Server | undefined;
  const sockets: Socket[] = [];

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  });

  it('retries with a bounded backoff, says what it waits for, and connects once the dependency appears', async () => {
    const port = await freePort();
    const log = captureLogger('runtime-test');
    const reasons: string[] = [];
    const what = `the test server at 127.0.0.1:${port}`;
    const connected = waitForDependency({
      what,
      logger: log.logger,
      initialDelayMs: 5,
      maxDelayMs: 40,
      logIntervalMs: 0,
      onWaiting: (reason) => reasons.push(reason),
      attempt: () => dial(port),
    });
    // Several refused attempts first: the backoff grows to its bound and every attempt is logged (interval 0).
    const waitingLines = () => log.lines.filter((l) => l['msg'] === `waiting for ${what}`);
    while (waitingLines().length < 6) await new Promise((r) => setTimeout(r, 5));
    server = createServer((s) => sockets.push(s));
    await new Promise<void>((resolve) => server?.listen(port, '127.0.0.1', resolve));
    const socket = await connected;
    sockets.push(socket);

    expect(socket.remotePort).toBe(port);
    const lines = waitingLines();
    expect(lines[0]).toMatchObject({ level: 'warn', attempt: 1, retryInMs: 5, error: expect.stringContaining('ECONNREFUSED') });
    expect(lines.map((l) => l['retryInMs'])).toEqual(expect.arrayContaining([5, 10, 20, 40]));
    expect(Math.max(...lines.map((l) => l['retryInMs'] as number))).toBe(40);
    expect(reasons[0]).toBe(`waiting for ${what} (attempt 1: ${lines[0]?.['error']})`);
    const done = log.lines.find((l) => l['msg'] === `connected to ${what}`);
    expect(done).toMatchObject({ level: 'info', attempts: reasons.length + 1 });
  });

  it('logs nothing when the first attempt succeeds', async () => {
    const log = captureLogger('runtime-test');
    const value = await waitForDependency({ what: 'something', logger: log.logger, attempt: async () => 42 });
    expect(value).toBe(42);
    expect(log.lines).toEqual([]);
  });

  it('after the first failure logs at most once per interval, each line counting the attempts', async () => {
    const log = captureLogger('runtime-test');
    let calls = 0;
    const value = await waitForDependency({
      what: 'a flaky thing',
      logger: log.logger,
      initialDelayMs: 1,
      maxDelayMs: 1,
      logIntervalMs: 60_000,
      attempt: async () => {
        calls += 1;
        if (calls < 5) throw new Error(`no (${calls})`);
        return 'up';
      },
    });
    expect(value).toBe('up');
    expect(log.lines.map((l) => [l['msg'], l['attempt'] ?? l['attempts']])).toEqual([
      ['waiting for a flaky thing', 1],
      ['connected to a flaky thing', 5],
    ]);
  });
});
