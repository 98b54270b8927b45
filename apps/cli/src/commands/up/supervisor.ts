import { formatServiceLine, type LogStyle } from './log-format';
import { ManagedChild, type ChildExit } from './managed-child';
import { Watchdog } from './watchdog';

export interface SupervisorOptions {
  readonly out: NodeJS.WritableStream;
  readonly style: LogStyle;
  /** Time between SIGTERM and SIGKILL, for an orderly stop and for the watchdog. */
  readonly stopTimeoutMs: number;
}

/**
 * Owns the services of the local stack: starts each in its own process group with prefixed output, registers
 * it with the watchdog, reports unexpected exits, and stops them in reverse start order (gateway before NATS).
 */
export class Supervisor {
  private readonly children: ManagedChild[] = [];
  private readonly watchdog: Watchdog;
  private stopping = false;
  private unexpectedExit: ((child: ManagedChild, exit: ChildExit) => void) | undefined;

  constructor(private readonly options: SupervisorOptions) {
    this.watchdog = Watchdog.start(options.stopTimeoutMs);
  }

  /** Called once for the first service that exits while the stack is not stopping. */
  onUnexpectedExit(handler: (child: ManagedChild, exit: ChildExit) => void): void {
    this.unexpectedExit = handler;
  }

  /** Starts a service; `show` decides which of its lines reach the terminal (all are kept for error reports). */
  start(
    name: string,
    command: string,
    args: readonly string[],
    env?: NodeJS.ProcessEnv,
    show: (line: string) => boolean = () => true,
  ): ManagedChild {
    const child = new ManagedChild({
      name,
      command,
      args,
      ...(env ? { env } : {}),
      onLine: (n, line) => {
        if (show(line)) this.options.out.write(`${formatServiceLine(n, line, this.options.style)}\n`);
      },
    });
    if (child.pid !== undefined) this.watchdog.guard(child.pid);
    this.children.push(child);
    void child.exited.then((exit) => {
      if (child.pid !== undefined) this.watchdog.release(child.pid);
      if (!this.stopping && this.unexpectedExit) {
        const handler = this.unexpectedExit;
        this.unexpectedExit = undefined;
        handler(child, exit);
      }
    });
    return child;
  }

  /** Process ids of the running services (each is also a process group id). */
  pids(): number[] {
    return this.children.filter((c) => !c.hasExited && c.pid !== undefined).map((c) => c.pid as number);
  }

  /**
   * Stops every service, newest first, each with SIGTERM then SIGKILL after the stop timeout: the gateway drains
   * while the scheduler and NATS it needs are still up. Services that do not depend on each other stop together.
   */
  async stopAll(stages: readonly (readonly string[])[] = []): Promise<void> {
    this.stopping = true;
    const remaining = [...this.children].reverse();
    for (const stage of stages) {
      const batch = remaining.filter((c) => stage.includes(c.name));
      await Promise.all(batch.map((c) => c.stop(this.options.stopTimeoutMs)));
    }
    await Promise.all(remaining.map((c) => c.stop(this.options.stopTimeoutMs)));
    await this.watchdog.close();
  }

  /** A second Ctrl-C: SIGKILL everything now. */
  killAll(): void {
    this.stopping = true;
    for (const child of this.children) child.kill();
  }
}
