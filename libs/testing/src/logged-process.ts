import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { waitFor } from './wait-for';

/** A child process whose output goes to a log file, started by `startLoggedProcess`. */
export interface LoggedProcess {
  readonly process: ChildProcess;
  /** The tail of its log (for failures). */
  log(): string;
  /** SIGTERM, then resolves once it has exited; nothing to do when it is gone already. */
  close(): Promise<void>;
}

export interface LoggedProcessSpec {
  /** Names it in errors. */
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  /** Where its stdout and stderr go: a file, not a pipe (a pipe nobody drains would block it). */
  readonly logPath: string;
  /** Added to this process's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Answers true once it can take work; polled until `readyTimeoutMs`. */
  readonly ready: () => Promise<boolean>;
  readonly readyTimeoutMs?: number;
  readonly pollMs?: number;
  /** How many characters of the log `log()` keeps. */
  readonly logTail?: number;
}

function running(proc: ChildProcess): boolean {
  return proc.exitCode === null && proc.signalCode === null;
}

/**
 * Spawns a process (a reference proxy, a helper server), killed with this process if the caller never closes it,
 * and resolves once `ready` answers true. Fails at once if it exits first, and the error carries its log's tail;
 * on any failure it is closed before the error is thrown.
 */
export async function startLoggedProcess(spec: LoggedProcessSpec): Promise<LoggedProcess> {
  const fd = openSync(spec.logPath, 'w');
  const proc = spawn(spec.command, [...spec.args], { stdio: ['ignore', fd, fd], env: { ...process.env, ...spec.env } });
  closeSync(fd);
  const kill = () => {
    if (running(proc)) proc.kill('SIGKILL');
  };
  process.once('exit', kill);
  const log = () => {
    try {
      return readFileSync(spec.logPath, 'utf8').slice(-(spec.logTail ?? 4000));
    } catch {
      return '';
    }
  };
  const close = async () => {
    process.off('exit', kill);
    if (!running(proc)) return;
    const exited = new Promise((done) => proc.once('exit', done));
    proc.kill('SIGTERM');
    await exited;
  };
  const died = new Promise<never>((_, reject) => {
    proc.once('exit', (code, signal) => reject(new Error(`${spec.name} exited (${code ?? signal}): ${log()}`)));
  });
  died.catch(() => undefined);
  const polling = new AbortController();
  try {
    const ready = waitFor(spec.ready, {
      timeoutMs: spec.readyTimeoutMs ?? 30_000,
      intervalMs: spec.pollMs ?? 100,
      what: `${spec.name} ready`,
      signal: polling.signal,
    });
    ready.catch(() => undefined);
    await Promise.race([ready, died]);
  } catch (err) {
    await close();
    throw err;
  } finally {
    // when it died first, the readiness poll would otherwise go on for its whole budget
    polling.abort();
  }
  return { process: proc, log, close };
}
