import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort, waitFor } from '@triad/testing';

/** A router (a reference proxy or Triad) listening in front of a bench. */
export interface RunningRouter {
  readonly name: string;
  readonly url: string;
  /** The tail of its output, for failures. */
  log(): string;
  close(): Promise<void>;
}

const PYTHON = process.env['TRIAD_CONFORMANCE_PYTHON'] ?? '/usr/bin/python3';
const LAUNCHER = resolve(__dirname, '../python/run_reference.py');

export interface ReferenceLaunch {
  readonly name: string;
  /** Path of the reference's script (a local copy, never part of this repository). */
  readonly script: string;
  /** The script's own command line after `--host 127.0.0.1 --port <port>` (`--port <port>` without `hostFlag`). */
  readonly args: (port: number) => readonly string[];
  /** False for a script without `--host` (it binds 127.0.0.1 itself); default true. */
  readonly hostFlag?: boolean;
  /** Answers true once the proxy can take requests. */
  readonly ready: (url: string) => Promise<boolean>;
  readonly logDir: string;
  /** Extra environment (e.g. `OPENAI_API_KEY`). */
  readonly env?: Readonly<Record<string, string>>;
}

function running(proc: ChildProcess): boolean {
  return proc.exitCode === null && proc.signalCode === null;
}

/** Any HTTP answer at all on `path` (the proxy is listening). */
export function answers(path: string, ok: (status: number) => boolean = () => true): (url: string) => Promise<boolean> {
  return async (url) => {
    try {
      return ok((await fetch(`${url}${path}`)).status);
    } catch {
      return false;
    }
  };
}

/**
 * Runs a reference proxy as shipped (its own `__main__` and command line) under the system Python, through
 * `python/run_reference.py`, which installs stand-ins for the modules Debian 12 does not package first.
 */
export async function startReference(launch: ReferenceLaunch): Promise<RunningRouter> {
  const port = await freePort();
  const logPath = join(launch.logDir, `${launch.name}.log`);
  const fd = openSync(logPath, 'w');
  const listen = launch.hostFlag === false ? ['--port', String(port)] : ['--host', '127.0.0.1', '--port', String(port)];
  const argv = [LAUNCHER, launch.script, ...listen, ...launch.args(port)];
  const proc = spawn(PYTHON, argv, { stdio: ['ignore', fd, fd], env: { ...process.env, ...launch.env } });
  closeSync(fd);
  const kill = () => {
    if (running(proc)) proc.kill('SIGKILL');
  };
  process.once('exit', kill);
  const log = () => {
    try {
      return readFileSync(logPath, 'utf8').slice(-4000);
    } catch {
      return '';
    }
  };
  const close = async () => {
    process.off('exit', kill);
    if (!running(proc)) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  };
  const url = `http://127.0.0.1:${port}`;
  const died = new Promise<never>((_, reject) => {
    proc.once('exit', (code, signal) => reject(new Error(`${launch.name} exited (${code ?? signal}): ${log()}`)));
  });
  died.catch(() => undefined);
  try {
    await Promise.race([waitFor(() => launch.ready(url), { timeoutMs: 30_000, intervalMs: 100, what: `${launch.name} ready` }), died]);
  } catch (err) {
    await close();
    throw err;
  }
  return { name: launch.name, url, log, close };
}
