import { request } from 'undici';
import type { SimContext } from '../sim-context';

export type HandoffWait =
  | { readonly ok: true; readonly promptTokens: number }
  /** `unreachable`: the bootstrap server never answered before the deadline (wrong address, prefill down). */
  | { readonly ok: false; readonly reason: string; readonly unreachable?: boolean };

const RETRY_MS = 50;

/**
 * Decode side of a concurrent P/D hand-off: long-polls the prefill's bootstrap server (`baseUrl` + `path`) until the
 * prefill has computed the room or transfer. An unreachable bootstrap server is retried until the deadline, as a
 * decode keeps polling a prefill that is still starting.
 */
export async function waitForHandoff(
  ctx: SimContext,
  baseUrl: string,
  path: string,
  timeoutMs: number,
  headers: Record<string, string>,
  signal: AbortSignal,
  field: 'prompt_tokens' | 'rank' = 'prompt_tokens',
): Promise<HandoffWait> {
  const deadline = Date.now() + timeoutMs;
  let lastError = 'no answer';
  let unreachable = false;
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0 || signal.aborted) return { ok: false, reason: lastError, unreachable };
    try {
      const res = await request(`${baseUrl}${path}${path.includes('?') ? '&' : '?'}wait_ms=${remaining}`, {
        dispatcher: ctx.http,
        headers,
        signal,
        headersTimeout: remaining + 5_000,
        bodyTimeout: remaining + 5_000,
      });
      const body = (await res.body.json()) as Record<string, unknown>;
      const value = body[field];
      if (res.statusCode === 200 && typeof value === 'number') return { ok: true, promptTokens: value };
      return { ok: false, reason: String(body['error'] ?? `bootstrap server answered ${res.statusCode}`) };
    } catch (err) {
      lastError = `bootstrap server ${baseUrl} unreachable: ${(err as Error).message}`;
      unreachable = true;
      if (signal.aborted) return { ok: false, reason: 'client disconnected' };
      await ctx.clock.sleep(Math.min(RETRY_MS, Math.max(0, deadline - Date.now())));
    }
  }
}

/** `http://host:port` with IPv6 hosts bracketed. */
export function httpBase(host: string, port: number): string {
  return `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}
