import { request } from 'undici';
import type { SimContext } from '../sim-context';
import type { BootstrapFields } from './bootstrap-fields';
import { ROOM_WAIT_PATH } from './bootstrap-server';

export type RoomWait = { readonly ok: true; readonly promptTokens: number } | { readonly ok: false; readonly reason: string };

const RETRY_MS = 50;

/**
 * Decode side of SGLang PD: waits until the prefill at bootstrap_host:bootstrap_port has computed the room (a long
 * poll on its bootstrap server). An unreachable bootstrap server is retried until the deadline, as a decode keeps
 * polling a prefill that is still starting.
 */
export async function waitForRoom(ctx: SimContext, fields: BootstrapFields, timeoutMs: number, headers: Record<string, string>, signal: AbortSignal): Promise<RoomWait> {
  const deadline = Date.now() + timeoutMs;
  const host = fields.host.includes(':') && !fields.host.startsWith('[') ? `[${fields.host}]` : fields.host;
  let lastError = 'no answer';
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0 || signal.aborted) return { ok: false, reason: lastError };
    try {
      const res = await request(`http://${host}:${fields.port}${ROOM_WAIT_PATH}${fields.room}?wait_ms=${remaining}`, {
        dispatcher: ctx.http,
        headers,
        signal,
        headersTimeout: remaining + 5_000,
        bodyTimeout: remaining + 5_000,
      });
      const body = (await res.body.json()) as { prompt_tokens?: unknown; error?: unknown };
      if (res.statusCode === 200 && typeof body.prompt_tokens === 'number') return { ok: true, promptTokens: body.prompt_tokens };
      return { ok: false, reason: String(body.error ?? `bootstrap server answered ${res.statusCode}`) };
    } catch (err) {
      lastError = `bootstrap server ${host}:${fields.port} unreachable: ${(err as Error).message}`;
      if (signal.aborted) return { ok: false, reason: 'client disconnected' };
      await ctx.clock.sleep(Math.min(RETRY_MS, Math.max(0, deadline - Date.now())));
    }
  }
}
