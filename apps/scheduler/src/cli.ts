import { createLogger, onShutdown } from '@triad/runtime';
import { parseOptions } from './options';
import { startScheduler } from './runner';

/**
 * `triad scheduler --nats URL [--config FILE] [--metrics-port P]`: runs one replica until SIGTERM/SIGINT, then
 * drains (answers what it has received, leaves the queue group) and exits. Resolves once the replica is serving.
 */
export async function main(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  const logger = createLogger({ service: 'scheduler' });
  const service = await startScheduler({ ...options, logger });
  onShutdown(logger, () => service.close(), { graceMs: options.shutdownGraceMs });
}
