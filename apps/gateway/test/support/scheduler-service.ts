import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { freePort, waitFor } from '@triad/testing';

const TRIAD = resolve(__dirname, '../../../cli/bin/triad.js');

/** The real scheduler service (`triad scheduler`) as a child process of a gateway test. */
export interface SchedulerService {
  /** Resolves once its `/readyz` answers 200. */
  ready(): Promise<void>;
  /** SIGTERM, then waits for the exit; safe to call when it already exited. */
  stop(): Promise<void>;
}

export async function startSchedulerService(
  natsUrl: string,
  opts: { readonly args?: readonly string[]; readonly env?: Record<string, string> } = {},
): Promise<SchedulerService> {
  const metricsPort = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [TRIAD, 'scheduler', '--nats', natsUrl, '--metrics-port', String(metricsPort), ...(opts.args ?? [])],
    { stdio: 'ignore', env: { ...process.env, TRIAD_LOG_LEVEL: 'warn', ...opts.env } },
  );
  return {
    ready: async () => {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined))?.ok, {
        what: 'scheduler ready',
        timeoutMs: 30_000,
      });
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
