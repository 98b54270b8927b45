import { spawn, type ChildProcess } from 'node:child_process';

// The watchdog is a tiny detached node process that holds the read end of a pipe from `triad up`. If `triad up`
// dies without stopping its services (SIGKILL, a crash, the terminal's process killed), the kernel closes the
// pipe, and the watchdog terminates every process group it was told about: no service outlives its parent.
// It is passed as `node -e` source, so it works the same from the TypeScript sources and from the esbuild bundle.
const WATCHDOG_SOURCE = `
'use strict';
const groups = new Set();
let quit = false;
let pending = '';
const signal = (sig) => { for (const g of groups) { try { process.kill(-g, sig); } catch {} } };
process.stdin.on('data', (d) => {
  pending += d;
  const lines = pending.split('\\n');
  pending = lines.pop();
  for (const l of lines) {
    if (l === 'quit') quit = true;
    else if (l[0] === '+') groups.add(Number(l.slice(1)));
    else if (l[0] === '-') groups.delete(Number(l.slice(1)));
  }
});
process.stdin.on('close', () => {
  if (quit || groups.size === 0) process.exit(0);
  signal('SIGTERM');
  setTimeout(() => { signal('SIGKILL'); process.exit(0); }, Number(process.argv[1]) || 5000);
});
`;

/** The parent side of the watchdog: tell it which process groups to guard. */
export class Watchdog {
  private constructor(private readonly child: ChildProcess) {}

  /** Starts the watchdog; `graceMs` is how long the orphaned services get between SIGTERM and SIGKILL. */
  static start(graceMs: number): Watchdog {
    const child = spawn(process.execPath, ['-e', WATCHDOG_SOURCE, String(graceMs)], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    // Neither the process nor its pipe may keep `triad up` alive on their own.
    child.unref();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    child.on('error', () => undefined);
    child.stdin?.on('error', () => undefined);
    return new Watchdog(child);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  guard(pgid: number): void {
    this.child.stdin?.write(`+${pgid}\n`);
  }

  release(pgid: number): void {
    this.child.stdin?.write(`-${pgid}\n`);
  }

  /** Normal shutdown: the services are stopped already, so the watchdog just exits; resolves once it has. */
  close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null || this.child.pid === undefined) return Promise.resolve();
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    // Referenced again, or the event loop could empty and end `triad up` before the watchdog's exit arrives.
    this.child.ref();
    this.child.stdin?.end('quit\n');
    return exited;
  }
}
