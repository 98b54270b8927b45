import { request } from 'undici';
import type { Exchange, RouteHandler } from '../http/router';
import { sendJson } from '../http/respond';
import type { SimContext } from '../sim-context';
import type { KvBlockStore, PullResult } from './kv-block-store';

/**
 * The NIXL side channel, as HTTP. Real NIXL does a ZMQ handshake on `remote_host:remote_port` and then an RDMA
 * read; here the decode POSTs the params it got to the prefill, which checks them against the blocks it holds.
 */
export const KV_PULL_PATH = '/sim/nixl/pull';

/** A pull as the prefill answers it, counted on the prefill (served or rejected). */
function answerPull(ctx: SimContext, store: KvBlockStore, engineId: unknown, requestId: unknown, blockIds: unknown): PullResult {
  const result = store.pull(engineId, requestId, blockIds);
  ctx.counters.inc(result.ok ? 'kvPullsServed' : 'kvPullsRejected');
  return result;
}

/** Prefill side: serves pulls of held blocks. */
export function kvPullHandler(ctx: SimContext, store: KvBlockStore): RouteHandler {
  return (ex: Exchange) => {
    const body = (ex.body.ok ? ex.body.value : undefined) as Record<string, unknown> | undefined;
    const result = answerPull(ctx, store, body?.['remote_engine_id'], body?.['remote_request_id'], body?.['remote_block_ids']);
    if (result.ok) sendJson(ex.res, 200, JSON.stringify({ num_tokens: result.numTokens, block_ids: result.blockIds }));
    else sendJson(ex.res, result.status, JSON.stringify({ error: result.reason }));
  };
}

interface InProcessPrefill {
  readonly ctx: SimContext;
  readonly store: KvBlockStore;
}

/**
 * Prefills of this process that answer in-process pulls (`nixlSideChannel: 'in-process'`), by the address they
 * advertise in `remote_host:remote_port`. Process-wide like the port space it mirrors; entries leave on close.
 */
const inProcessPrefills = new Map<string, InProcessPrefill>();

/** Makes a listening prefill's blocks pullable in-process; returns the function that withdraws it. */
export function offerInProcessPulls(ctx: SimContext, store: KvBlockStore): () => void {
  const key = `${ctx.advertiseHost}:${ctx.port}`;
  const entry: InProcessPrefill = { ctx, store };
  inProcessPrefills.set(key, entry);
  return () => {
    if (inProcessPrefills.get(key) === entry) inProcessPrefills.delete(key);
  };
}

/** The parts of NIXL `kv_transfer_params` a decode needs to find the prefill's blocks. */
interface RemotePrefill {
  readonly engineId: string;
  readonly requestId: string;
  readonly blockIds: unknown[];
  readonly host: string;
  readonly port: number;
}

/** Reads `kv_transfer_params` from a decode request; undefined when they do not describe a remote prefill. */
export function remotePrefillOf(params: unknown, ownRequestId: string): RemotePrefill | undefined {
  if (!params || typeof params !== 'object') return undefined;
  const p = params as Record<string, unknown>;
  if (p['do_remote_prefill'] !== true) return undefined;
  const { remote_engine_id: engineId, remote_block_ids: blockIds, remote_host: host, remote_port: port } = p;
  if (
    typeof engineId !== 'string' ||
    !Array.isArray(blockIds) ||
    typeof host !== 'string' ||
    typeof port !== 'number' ||
    !Number.isInteger(port)
  )
    return undefined;
  // Older NIXL params carry no remote_request_id: P and D then share the proxy's X-Request-Id.
  const requestId = typeof p['remote_request_id'] === 'string' ? p['remote_request_id'] : ownRequestId;
  return { engineId, requestId, blockIds, host, port };
}

const PULL_TIMEOUT_MS = 10_000;

/** Decode side: reads the blocks from the prefill; resolves to the transferred token count, or undefined on failure (the caller counts it). */
export async function pullKv(ctx: SimContext, remote: RemotePrefill, headers: Record<string, string>): Promise<number | undefined> {
  const peer = ctx.options.nixlSideChannel === 'in-process' ? inProcessPrefills.get(`${remote.host}:${remote.port}`) : undefined;
  if (peer !== undefined) {
    ctx.counters.inc('kvPullsInProcess');
    const result = answerPull(peer.ctx, peer.store, remote.engineId, remote.requestId, remote.blockIds);
    if (result.ok) return result.numTokens;
    ctx.logger?.debug({ status: result.status, error: result.reason, requestId: remote.requestId }, 'KV pull rejected');
    return undefined;
  }
  const host = remote.host.includes(':') ? `[${remote.host}]` : remote.host;
  try {
    const res = await request(`http://${host}:${remote.port}${KV_PULL_PATH}`, {
      method: 'POST',
      dispatcher: ctx.http,
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ remote_engine_id: remote.engineId, remote_request_id: remote.requestId, remote_block_ids: remote.blockIds }),
      headersTimeout: PULL_TIMEOUT_MS,
      bodyTimeout: PULL_TIMEOUT_MS,
    });
    const body = (await res.body.json()) as { num_tokens?: unknown; error?: unknown };
    if (res.statusCode === 200 && typeof body.num_tokens === 'number') return body.num_tokens;
    ctx.logger?.debug({ status: res.statusCode, error: body.error, requestId: remote.requestId }, 'KV pull rejected');
  } catch (err) {
    ctx.logger?.debug({ err, requestId: remote.requestId }, 'KV pull failed');
  }
  return undefined;
}
