import pino, { type Logger } from 'pino';

export type { Logger };

export interface LoggerOptions {
  /** Service name, written as `service` on every line. */
  readonly service: string;
  /** pino level; defaults to `TRIAD_LOG_LEVEL` or `info`. */
  readonly level?: string;
  /** Where lines go; defaults to stdout. Tests pass a stream to capture them. */
  readonly destination?: NodeJS.WritableStream;
}

/** A JSON-lines logger (pino) with the service name and ISO timestamps on every line. */
export function createLogger(options: LoggerOptions): Logger {
  const level = options.level ?? process.env['TRIAD_LOG_LEVEL'] ?? 'info';
  return pino(
    {
      level,
      base: { service: options.service },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
