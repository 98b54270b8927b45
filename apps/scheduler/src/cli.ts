import { createLogger, guardProcess, onShutdown } from '@triad/runtime';
import { setupTelemetry } from '@triad/telemetry';
import { parseOptions } from './options';
import { startScheduler } from './runner';

const VERSION = '0.1.0';

/**
 * `triad scheduler --nats URL [--config FILE] [--metrics-port P]`: runs one replica until SIGTERM/SIGINT, then
 * drains (answers what it has received, leaves the queue group), flushes traces and exits. Resolves once the
 * replica is serving.
 */
export async function main(argv: readonly string[]): Promise<void> {
  let options: ReturnType<typeof parseOptions>;
  try {
    options = parseOptions(argv);
  } catch (err) {
    // parseOptions uses commander's exitOverride (so tests can parse); `--help` is a normal exit, not a failure.
    if ((err as { code?: string }).code === 'commander.helpDisplayed') return;
    throw err;
  }
  const logger = createLogger({ service: 'scheduler' });
  // An unhandled rejection is logged and counted (triad_unexpected_errors_total), not the end of the process.
  guardProcess(logger);
  const telemetry = setupTelemetry({ serviceName: 'triad-scheduler', version: VERSION, logger });
  const service = await startScheduler({ ...options, logger }).catch(async (err: unknown) => {
    await telemetry.shutdown();
    throw err;
  });
  onShutdown(
    logger,
    async () => {
      await service.close();
      await telemetry.shutdown();
    },
    { graceMs: options.shutdownGraceMs },
  );
}
