import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, spawnTriad, startNatsServer, waitFor, waitReady, type NatsServerHandle, type TriadChild } from '@triad/testing';

// Every long-running service installs the same process guard (libs/runtime guardProcess): a promise rejection that
// nobody handles is logged and counted in triad_unexpected_errors_total{source="unhandled_rejection"}, and the
// service keeps serving. Each service runs here as a real child process; a preloaded hook makes it reject a promise
// nobody awaits when it receives SIGUSR2, as a bug in a request path would.

const dir = mkdtempSync(join(tmpdir(), 'triad-guard-'));
const hook = join(dir, 'reject-on-signal.cjs');
writeFileSync(hook, `process.on('SIGUSR2', () => { Promise.reject(new Error('process-guard probe: nobody awaited me')); });\n`);
const configPath = join(dir, 'cluster.yaml');
writeFileSync(
  configPath,
  `
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: tiny, namespace: default}
spec: {model: tiny-model, inferenceEngine: vLLM, workloadPort: {port: 8000}, workloadSelector: {matchLabels: {app: tiny}}}
`,
);

interface Service {
  readonly name: string;
  readonly opsPort: number;
  readonly child: TriadChild;
}

const get = (port: number, path: string) =>
  fetch(`http://127.0.0.1:${port}${path}`).then(
    async (r) => ({ status: r.status, text: await r.text() }),
    () => undefined,
  );

/** triad_unexpected_errors_total{source="unhandled_rejection"} of one service, or undefined when it is not exported. */
async function unhandledCount(port: number): Promise<number | undefined> {
  const text = (await get(port, '/metrics'))?.text ?? '';
  const m = /^triad_unexpected_errors_total\{source="unhandled_rejection"\} (\S+)$/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

describe('process guard in every service (child processes)', () => {
  let nats: NatsServerHandle;
  const services: Service[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    const env = { NODE_OPTIONS: `--require ${hook}`, TRIAD_LOG_LEVEL: 'info' };
    const start = async (name: string, args: (opsPort: number) => string[]) => {
      const opsPort = await freePort();
      services.push({ name, opsPort, child: spawnTriad([name, '--nats', nats.url, ...args(opsPort)], env) });
    };
    await start('scheduler', (ops) => ['--metrics-port', String(ops)]);
    await start('pod-watcher', (ops) => ['--source', `file:${configPath}`, '--metrics-port', String(ops)]);
    await start('kv-indexer', (ops) => ['--metrics-port', String(ops)]);
    await start('gateway', (ops) => ['--host', '127.0.0.1', '--port', '0', '--metrics-port', String(ops), '--drain-timeout-ms', '1000']);
    for (const s of services) await waitReady(s.child, s.opsPort, s.name);
  }, 120_000);

  afterAll(async () => {
    await Promise.all(services.map((s) => s.child.stop()));
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('each exports triad_unexpected_errors_total at 0 before anything went wrong', async () => {
    for (const s of services) expect(`${s.name} ${await unhandledCount(s.opsPort)}`).toBe(`${s.name} 0`);
  });

  it('an unhandled rejection is logged and counted, and the service stays up and ready', async () => {
    for (const s of services) {
      s.child.process.kill('SIGUSR2');
      await waitFor(async () => (await unhandledCount(s.opsPort)) === 1, { what: `${s.name} to count the rejection` });
      // The counter moves first; the log line reaches the pipe a moment later.
      const probeLine = () =>
        s.child
          .output()
          .split('\n')
          .find((l) => l.includes('process-guard probe'));
      await waitFor(() => probeLine() !== undefined, { what: `${s.name} to log the rejection` });
      const line = probeLine();
      expect(JSON.parse(line as string)).toMatchObject({
        level: 'error',
        source: 'unhandled_rejection',
        err: { message: 'process-guard probe: nobody awaited me' },
      });
      expect(s.child.process.exitCode).toBeNull();
      expect((await get(s.opsPort, '/readyz'))?.status).toBe(200);
    }
  }, 60_000);
});
