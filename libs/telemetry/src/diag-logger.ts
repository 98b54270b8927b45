import type { DiagLogger } from '@opentelemetry/api';

/** The logger methods telemetry uses (pino-compatible), so this library does not depend on a logging library. */
export interface TelemetryLogger {
  warn(obj: object, msg?: string): void;
  info?(obj: object, msg?: string): void;
}

/** Same message at most once per this many ms; a dead collector otherwise logs an error every batch. */
const REPEAT_MS = 60_000;

function describe(args: unknown[]): string {
  return args
    .map((a) =>
      a instanceof Error
        ? a.message
        : typeof a === 'string'
          ? a
          : (() => {
              try {
                return JSON.stringify(a);
              } catch {
                return String(a);
              }
            })(),
    )
    .join(' ')
    .slice(0, 500);
}

/**
 * Routes the SDK's own diagnostics (export failures, dropped spans) to the service logger as warnings, throttled
 * per message so an unreachable collector produces one line a minute with a count, not one per export.
 */
export function throttledDiagLogger(logger: TelemetryLogger, now: () => number = Date.now): DiagLogger {
  const seen = new Map<string, { at: number; suppressed: number }>();
  const emit = (level: string, message: string, args: unknown[]) => {
    const text = describe([message, ...args]);
    const key = text.slice(0, 120);
    const t = now();
    const prev = seen.get(key);
    if (prev && t - prev.at < REPEAT_MS) {
      prev.suppressed++;
      return;
    }
    seen.set(key, { at: t, suppressed: 0 });
    if (seen.size > 100) seen.clear();
    logger.warn({ component: 'opentelemetry', otelLevel: level, suppressedRepeats: prev?.suppressed ?? 0 }, text);
  };
  return {
    error: (message, ...args) => emit('error', message, args),
    warn: (message, ...args) => emit('warn', message, args),
    info: () => undefined,
    debug: () => undefined,
    verbose: () => undefined,
  };
}
