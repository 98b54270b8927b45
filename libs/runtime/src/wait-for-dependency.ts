import type { Logger } from 'pino';
import { retry } from './retry';

export interface WaitForDependencyOptions<T> {
  /** What is awaited, as log lines and readiness reasons name it: `NATS at nats://nats:4222`. */
  readonly what: string;
  /** One attempt: resolves with the connection or rejects. It should fail within a few seconds. */
  readonly attempt: () => Promise<T>;
  readonly logger: Logger;
  /** Told the current reason while waiting (`waiting for NATS at ... (attempt 3: connection refused)`). */
  readonly onWaiting?: (reason: string) => void;
  /** Delay after the first failed attempt; doubles up to `maxDelayMs`. Default 250 ms. */
  readonly initialDelayMs?: number;
  /** Longest delay between attempts: bounds the time from the dependency appearing to being connected. Default 2 s. */
  readonly maxDelayMs?: number;
  /** After the first failure, a log line at most this often (each names the attempts so far). Default 5 s. */
  readonly logIntervalMs?: number;
}

/** The failure text of an attempt, shortest useful form (nats.js wraps the socket error). */
function failureText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}${typeof code === 'string' && !err.message.includes(code) ? ` (${code})` : ''}`;
}

/**
 * Retries `attempt` until it succeeds, with a bounded exponential backoff, and says so: a service that starts
 * before its dependency logs `waiting for <what>` (first failure at once, then at a steady interval) and reports
 * the reason through `onWaiting` (its `/readyz` answer), instead of hanging silently. Never gives up: under
 * Kubernetes the startup probe decides how long is too long.
 */
export async function waitForDependency<T>(options: WaitForDependencyOptions<T>): Promise<T> {
  const initialMs = options.initialDelayMs ?? 250;
  const logInterval = options.logIntervalMs ?? 5_000;
  const started = Date.now();
  let lastLog = 0;
  let failures = 0;
  const connected = await retry(options.attempt, {
    initialMs,
    maxMs: Math.max(initialMs, options.maxDelayMs ?? 2_000),
    onRetry: (err, attempt, retryInMs) => {
      failures = attempt;
      const error = failureText(err);
      options.onWaiting?.(`waiting for ${options.what} (attempt ${attempt}: ${error})`);
      const now = Date.now();
      if (attempt === 1 || now - lastLog >= logInterval) {
        lastLog = now;
        options.logger.warn({ attempt, error, retryInMs, waitedMs: now - started }, `waiting for ${options.what}`);
      }
    },
  });
  if (failures > 0) options.logger.info({ attempts: failures + 1, waitedMs: Date.now() - started }, `connected to ${options.what}`);
  return connected;
}
