import type { ServerResponse } from 'node:http';

/** The comment vLLM writes into an idle stream (`with_sse_keep_alive`). */
export const SSE_KEEP_ALIVE_COMMENT = ': keep-alive\n\n';

/**
 * vLLM's `--sse-keep-alive-interval` (off by default): its server wraps a streamed answer's generator and writes a
 * comment whenever no chunk came for the interval, while the request waits for KV, is queued, prefills, or between
 * tokens. Here the response is looked at every `intervalMs` once its stream is open, and a comment goes out when
 * nothing was written since the last look (so after one to two intervals of silence). Off without a positive interval.
 */
export function keepStreamAlive(res: ServerResponse, intervalMs: number | undefined): void {
  if (intervalMs === undefined || !(intervalMs > 0)) return;
  const written = () => (res.socket?.bytesWritten ?? 0) + res.writableLength;
  let seen = -1;
  const timer = setInterval(() => {
    if (res.writableEnded || res.destroyed) {
      clearInterval(timer);
      return;
    }
    if (!res.headersSent) return;
    if (written() === seen) res.write(SSE_KEEP_ALIVE_COMMENT);
    seen = written();
  }, intervalMs);
  timer.unref();
  res.once('close', () => clearInterval(timer));
}
