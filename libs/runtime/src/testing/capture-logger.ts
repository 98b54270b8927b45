import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../logger';

/** A logger whose JSON lines are kept in memory, parsed, instead of written to stdout. */
export interface CapturedLogger {
  readonly logger: Logger;
  /** Every line written so far, in order (the array grows as the logger writes). */
  readonly lines: Record<string, unknown>[];
}

/**
 * A logger for tests: they assert on what a service logged, and the test output stays quiet. pino writes
 * whole lines, but a write may carry several of them, so each write is split.
 */
export function captureLogger(service: string, level = 'info'): CapturedLogger {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ service, level, destination }), lines };
}
