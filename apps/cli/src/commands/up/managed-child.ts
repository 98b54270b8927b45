import { spawn, type ChildProcess } from 'node:child_process';
import { LineSplitter } from './line-splitter';

/** How a service process ended. `error` is set when it could not be started at all (e.g. ENOENT). */
export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly error?: NodeJS.ErrnoException;
}

export interface ManagedChildOptions {
  /** Short name shown in front of every line and in messages. */
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Called for each line the process writes to stdout or stderr. */
  readonly onLine: (name: string, line: string) => void;
}

const TAIL_LINES = 30;

/** Sends `signal` to a whole process group; a group that is already gone is not an error. */
function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/**
 * One service of the local stack, run in its own process group (`detached`), so that stopping it also stops
 * anything it started and a Ctrl-C in the terminal reaches only `triad up`, which then stops the services in order.
 */
export class ManagedChild {
  readonly name: string;
  /** Resolves once the process has exited (or failed to start). */
  readonly exited: Promise<ChildExit>;
  private readonly child: ChildProcess;
  private readonly tail: string[] = [];
  private exitInfo: ChildExit | undefined;

  constructor(options: ManagedChildOptions) {
    this.name = options.name;
    this.child = spawn(options.command, [...options.args], {
      cwd: options.cwd,
      env: options.env ?? process.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const record = (line: string) => {
      this.tail.push(line);
      if (this.tail.length > TAIL_LINES) this.tail.shift();
      options.onLine(this.name, line);
    };
    const out = new LineSplitter(record);
    const err = new LineSplitter(record);
    this.child.stdout?.on('data', (d: Buffer) => out.push(d));
    this.child.stderr?.on('data', (d: Buffer) => err.push(d));
    this.exited = new Promise<ChildExit>((resolve) => {
      this.child.once('error', (error: NodeJS.ErrnoException) => {
        // 'error' without a pid means the spawn itself failed; no 'exit' follows.
        if (this.child.pid === undefined) {
          this.exitInfo = { code: null, signal: null, error };
          resolve(this.exitInfo);
        }
      });
      this.child.once('exit', (code, signal) => {
        out.flush();
        err.flush();
        this.exitInfo = { code, signal };
        // Whatever the service started in its group goes with it.
        if (this.child.pid !== undefined) signalGroup(this.child.pid, 'SIGKILL');
        resolve(this.exitInfo);
      });
    });
  }

  /** Process id, which is also the process group id. Undefined when the spawn failed. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  get hasExited(): boolean {
    return this.exitInfo !== undefined;
  }

  /** The last lines the process wrote, for error messages. */
  lastLines(): readonly string[] {
    return [...this.tail];
  }

  /** SIGTERM to the group, then SIGKILL if it has not exited after `timeoutMs`. Resolves when it is gone. */
  async stop(timeoutMs: number): Promise<ChildExit> {
    const pid = this.child.pid;
    if (this.exitInfo || pid === undefined) return this.exited;
    signalGroup(pid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(pid, 'SIGKILL'), timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** SIGKILL to the group at once (a second Ctrl-C). */
  kill(): void {
    if (!this.exitInfo && this.child.pid !== undefined) signalGroup(this.child.pid, 'SIGKILL');
  }
}

/** Describes an exit for a person: "exited with code 1", "was killed by SIGKILL", "could not start: ...". */
export function describeExit(exit: ChildExit): string {
  if (exit.error) return `could not start: ${exit.error.message}`;
  if (exit.signal) return `was stopped by ${exit.signal}`;
  return `exited with code ${exit.code}`;
}
