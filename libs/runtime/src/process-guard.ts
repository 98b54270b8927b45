import { Counter, type Registry } from 'prom-client';
import type { Logger } from 'pino';

/** Where an unexpected error was caught. */
export type UnexpectedSource = 'unhandled_rejection' | 'request_handler';

const counts = new Map<UnexpectedSource, number>();
let installed: ((reason: unknown) => void) | undefined;

/** Counts an error that got past every handler meant for it (exported for the last-resort catches in services). */
export function countUnexpected(source: UnexpectedSource): void {
  counts.set(source, (counts.get(source) ?? 0) + 1);
}

/** How many unexpected errors were counted from `source` in this process. */
export function unexpectedCount(source: UnexpectedSource): number {
  return counts.get(source) ?? 0;
}

/**
 * The last line of defence: a promise rejection nobody handled is logged (with its stack) and counted in
 * `triad_unexpected_errors_total{source="unhandled_rejection"}` instead of ending the process, which is Node's
 * default. One such rejection is a bug, but it concerns one request; dying would fail every other request in
 * flight. Installed once per process (later calls keep the first logger). Uncaught exceptions still end the
 * process: after one, state may be half-updated, and the orchestrator restarts it.
 */
export function guardProcess(logger: Logger): void {
  if (installed !== undefined) return;
  installed = (reason: unknown) => {
    countUnexpected('unhandled_rejection');
    logger.error(
      { err: reason, source: 'unhandled_rejection' },
      'unexpected unhandled promise rejection (a bug; the process keeps running)',
    );
  };
  process.on('unhandledRejection', installed);
}

const METRIC = 'triad_unexpected_errors_total';

/**
 * Exposes the counts as `triad_unexpected_errors_total{source}` (the same name in every service). Every ops server
 * registers it on the registry it serves; calling it again for the same registry does nothing.
 */
export function registerUnexpectedErrorMetrics(registry: Registry): void {
  if (registry.getSingleMetric(METRIC) !== undefined) return;
  new Counter({
    name: METRIC,
    help: 'Errors that escaped every handler meant for them (unhandled rejections, request handler failures); each is a bug',
    labelNames: ['source'],
    registers: [registry],
    collect() {
      this.reset();
      for (const source of ['unhandled_rejection', 'request_handler'] as const) this.inc({ source }, unexpectedCount(source));
    },
  });
}
