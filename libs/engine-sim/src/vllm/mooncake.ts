import type { ServerResponse } from 'node:http';
import { TRANSFER_WAIT_PATH } from '../bootstrap/bootstrap-server';
import { waitForHandoff } from '../bootstrap/handoff-wait';
import type { SimContext } from '../sim-context';

/**
 * vLLM's Mooncake connector flow (docs/protocols/vllm.md): the proxy calls P and D concurrently, P with
 * `{do_remote_decode: true, transfer_id}` and D with `{do_remote_prefill: true, remote_bootstrap_addr, remote_engine_id,
 * transfer_id}`; D waits at P's bootstrap server until P has computed that transfer.
 */
export interface MooncakeRemote {
  readonly bootstrapAddr: string;
  readonly transferId: string;
}

function asRecord(params: unknown): Record<string, unknown> | undefined {
  return params && typeof params === 'object' ? (params as Record<string, unknown>) : undefined;
}

/** Decode side: the prefill to wait for, when the params are Mooncake-style. */
export function mooncakeRemoteOf(params: unknown): MooncakeRemote | undefined {
  const p = asRecord(params);
  if (!p || p['do_remote_prefill'] !== true) return undefined;
  const { remote_bootstrap_addr: addr, transfer_id: id } = p;
  if (typeof addr !== 'string' || typeof id !== 'string' || addr.length === 0 || id.length === 0) return undefined;
  return { bootstrapAddr: addr.replace(/\/+$/, ''), transferId: id };
}

/** Prefill side: the transfer id a Mooncake proxy asked this prefill to compute. */
export function mooncakeTransferIdOf(params: unknown): string | undefined {
  const p = asRecord(params);
  return p && p['do_remote_decode'] === true && typeof p['transfer_id'] === 'string' ? (p['transfer_id'] as string) : undefined;
}

/** Waits for the prefill's transfer; resolves to its prompt tokens, or undefined when it never came (counted). */
export async function awaitMooncakeTransfer(
  ctx: SimContext,
  remote: MooncakeRemote,
  headers: Record<string, string>,
  res: ServerResponse,
): Promise<number | undefined> {
  const abort = new AbortController();
  res.once('close', () => abort.abort());
  const path = `${TRANSFER_WAIT_PATH}${encodeURIComponent(remote.transferId)}`;
  const result = await waitForHandoff(ctx, remote.bootstrapAddr, path, ctx.options.bootstrapTimeoutMs ?? 30_000, headers, abort.signal);
  if (result.ok) return result.promptTokens;
  ctx.logger?.debug({ transferId: remote.transferId, reason: result.reason }, 'Mooncake transfer never arrived');
  ctx.counters.inc('kvPullFailures');
  return undefined;
}
