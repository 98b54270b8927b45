import type { Logger } from 'pino';

export interface ShutdownOptions {
  /** Longest time the close callback may take before the process exits anyway. */
  readonly graceMs: number;
  readonly signals?: readonly NodeJS.Signals[];
}

/**
 * Runs `close` once on SIGTERM/SIGINT (a second signal exits at once), then exits 0, or 1 when closing failed
 * or overran the grace period.
 */
export function onShutdown(logger: Logger, close: (signal: string) => Promise<void>, options: ShutdownOptions): void {
  let closing = false;
  const handler = (signal: NodeJS.Signals) => {
    if (closing) {
      logger.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    closing = true;
    logger.info({ signal, graceMs: options.graceMs }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error({ graceMs: options.graceMs }, 'shutdown overran its grace period');
      process.exit(1);
    }, options.graceMs);
    timer.unref();
    close(signal).then(
      () => {
        logger.info('stopped');
        logger.flush?.();
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  for (const signal of options.signals ?? ['SIGTERM', 'SIGINT']) process.on(signal, handler);
}
