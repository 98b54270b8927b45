/**
 * Polls `check` until it returns a truthy value (which is returned) or the timeout passes (then throws). `signal`
 * stops the polling early (it then rejects with the signal's reason): a caller racing the wait against something
 * else (a child process exiting) aborts it when the other side wins, so no poll timer outlives the test.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  opts: { timeoutMs?: number; intervalMs?: number; what?: string; signal?: AbortSignal } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  let lastError: unknown;
  for (;;) {
    opts.signal?.throwIfAborted();
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? `: last error ${lastError.message}` : '';
      throw new Error(`timed out after ${opts.timeoutMs ?? 10_000} ms waiting for ${opts.what ?? 'condition'}${why}`);
    }
    await pause(opts.intervalMs ?? 20, opts.signal);
  }
}

/** Resolves after `ms`, or at once when `signal` is aborted (the loop then throws on its next turn). */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
