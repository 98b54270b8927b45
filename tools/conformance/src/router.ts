import { join, resolve } from 'node:path';
import { freePort, startLoggedProcess } from '@triad/testing';

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
  const listen = launch.hostFlag === false ? ['--port', String(port)] : ['--host', '127.0.0.1', '--port', String(port)];
  const url = `http://127.0.0.1:${port}`;
  const proxy = await startLoggedProcess({
    name: launch.name,
    command: PYTHON,
    args: [LAUNCHER, launch.script, ...listen, ...launch.args(port)],
    logPath: join(launch.logDir, `${launch.name}.log`),
    ...(launch.env ? { env: launch.env } : {}),
    ready: () => launch.ready(url),
  });
  return { name: launch.name, url, log: proxy.log, close: proxy.close };
}
