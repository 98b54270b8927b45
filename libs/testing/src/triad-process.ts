import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { waitFor } from './wait-for';

// The `triad` binary of this checkout: tests run the real services as child processes. A benchmark may run another
// checkout's services against this one's harness and engine-sims (`TRIAD_BENCH_BIN`: the "before" of an A/B pair).
export const TRIAD_BIN = process.env['TRIAD_BENCH_BIN'] ?? resolve(__dirname, '../../../apps/cli/bin/triad.js');

/** A `triad <command>` child process with its output kept (shown when it fails to become ready). */
export interface TriadChild {
  readonly process: ChildProcess;
  output(): string;
  /** SIGTERM, then resolves once it has exited (its drain flushes traces first). */
  stop(): Promise<void>;
}

/** Spawns `node apps/cli/bin/triad.js <args>` with `env` added to this process's environment. */
export function spawnTriad(args: readonly string[], env: Record<string, string>): TriadChild {
  const child = spawn(process.execPath, [TRIAD_BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((done) => {
    if (child.exitCode !== null || child.signalCode !== null) done();
    else child.once('exit', () => done());
  });
  return {
    process: child,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Waits until the child's `/readyz` answers 200; fails at once if it exits, and the error carries its output. */
export async function waitReady(child: TriadChild, opsPort: number, what: string): Promise<void> {
  const died = new Promise<never>((_, reject) => {
    child.process.once('exit', (code) => reject(new Error(`${what}: exited with code ${code}`)));
  });
  const polling = new AbortController();
  const ready = waitFor(async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`).catch(() => undefined))?.ok, {
    what,
    timeoutMs: 60_000,
    intervalMs: 100,
    signal: polling.signal,
  });
  ready.catch(() => undefined);
  try {
    await Promise.race([died, ready]);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- output ---\n${child.output()}`, { cause: err });
  } finally {
    // when it died first, the readiness poll would otherwise go on for its whole budget
    polling.abort();
  }
}
