import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = join(__dirname, '..', '..', '..', '..');

/**
 * Runs `triad pod-watcher --source kube` as its own process against a kubeconfig, with extra flags, and resolves once
 * it logged its ops port. `cpuProfileDir` writes a V8 CPU profile of it.
 */
export async function startWatcherProcess(
  natsUrl: string,
  kubeconfig: string,
  flags: readonly string[],
  cpuProfileDir?: string,
): Promise<{ child: ChildProcess; opsPort: number }> {
  const profile = cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfileDir}`] : [];
  const child = spawn(
    process.execPath,
    [
      ...profile,
      join(ROOT, 'apps/cli/bin/triad.js'),
      'pod-watcher',
      '--nats',
      natsUrl,
      '--source',
      'kube',
      '--kubeconfig',
      kubeconfig,
      '--metrics-port',
      '0',
      '--identity',
      'bench',
      ...flags,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, TRIAD_LOG_LEVEL: 'info' } },
  );
  const lines = createInterface({ input: child.stdout });
  for await (const line of lines) {
    const msg = JSON.parse(line) as { msg?: string; opsPort?: number };
    if (msg.msg === 'pod-watcher starting' && msg.opsPort) {
      lines.removeAllListeners();
      lines.close();
      child.stdout.resume();
      return { child, opsPort: msg.opsPort };
    }
  }
  throw new Error('pod-watcher exited before it started');
}

/** Stops a watcher process and waits for it to exit. */
export async function stopWatcherProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child) return;
  child.kill('SIGTERM');
  if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
}
