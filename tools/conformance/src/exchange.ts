/**
 * One HTTP exchange a recording tap saw between a router and an engine-sim: what the router sent and what the
 * engine answered, with the tap's clock (ms, monotonic) at the request's arrival and at the answer's end.
 */
export interface Exchange {
  /** The stage the tap stands in front of: `E0`, `E1`, `P`, `D`, … */
  readonly stage: string;
  /** `api` (the engine's HTTP port) or `bootstrap` (a prefill's bootstrap server). */
  readonly port: 'api' | 'bootstrap';
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  /** Request headers, lower-case names (repeated headers joined with `, `). */
  readonly headers: Readonly<Record<string, string>>;
  /** The request body as sent (empty for none). */
  readonly body: string;
  /** 0 when the engine never answered (connect error, the router went away first). */
  readonly status: number;
  /** The answer's body, up to a cap (enough for a non-streamed answer's `kv_transfer_params`). */
  readonly responseBody: string;
  readonly startedAt: number;
  /** When the answer's last byte went to the router (or the exchange broke off). */
  readonly endedAt: number;
}

/** Paths that are housekeeping, not a request's protocol: health probes, scrapes, model lists. */
const HOUSEKEEPING = new Set(['/health', '/healthz', '/ping', '/metrics', '/v1/models', '/version', '/server_info', '/get_server_info']);

/** Simulator-internal paths (a decode waiting at its prefill's bootstrap server): engine-to-engine, not router traffic. */
const SIM_INTERNAL = /^\/sim\//;

/**
 * Engine-to-engine traffic on a prefill's bootstrap port: an SGLang decode reads the prefill's `/route` (routers do
 * not), and the simulator's waits. A router's own bootstrap call (vLLM Mooncake `GET /query`) stays.
 */
function engineToEngine(x: Exchange): boolean {
  return SIM_INTERNAL.test(x.path) || (x.port === 'bootstrap' && x.path === '/route');
}

/** The exchanges of a request that are the router's protocol (not probes, not engine-to-engine traffic). */
export function protocolExchanges(all: readonly Exchange[]): Exchange[] {
  return all.filter((x) => !HOUSEKEEPING.has(x.path) && !engineToEngine(x));
}
