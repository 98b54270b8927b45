import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port';
import { startLoggedProcess, type LoggedProcess } from './logged-process';

describe('startLoggedProcess', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-logged-'));
  const started: LoggedProcess[] = [];
  afterAll(async () => {
    await Promise.all(started.map((p) => p.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  /** A one-line node HTTP server on a free port answering `answer` (JS), started and tracked for afterAll. */
  async function startServer(name: string, answer: string, env?: Record<string, string>) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/`;
    const server = `require('http').createServer((q, s) => s.end(${answer})).listen(${port}, '127.0.0.1', () => console.log('listening ${port}'))`;
    const proc = await startLoggedProcess({
      name,
      command: process.execPath,
      args: ['-e', server],
      logPath: join(dir, `${name}.log`),
      ...(env ? { env } : {}),
      ready: () =>
        fetch(url).then(
          (r) => r.ok,
          () => false,
        ),
    });
    started.push(proc);
    return { proc, url, port };
  }

  it('resolves once the process is ready, keeps its output in the log and stops it on close', async () => {
    const { proc, url, port } = await startServer('server', "'ok'");
    expect(await (await fetch(url)).text()).toBe('ok');
    expect(proc.log()).toContain(`listening ${port}`);
    await proc.close();
    expect(proc.process.signalCode).toBe('SIGTERM');
    await expect(fetch(url)).rejects.toThrow();
  });

  it('fails with the tail of its log when the process exits before it is ready (not after the readiness budget)', async () => {
    await expect(
      startLoggedProcess({
        name: 'broken',
        command: process.execPath,
        args: ['-e', "console.error('no config here'); process.exit(3)"],
        logPath: join(dir, 'broken.log'),
        readyTimeoutMs: 60_000,
        ready: async () => false,
      }),
    ).rejects.toThrow(/broken exited \(3\): no config here/);
  });

  it('passes the extra environment to the process', async () => {
    const { url } = await startServer('env', 'process.env.GREETING', { GREETING: 'hello from the env' });
    expect(await (await fetch(url)).text()).toBe('hello from the env');
  });
});
