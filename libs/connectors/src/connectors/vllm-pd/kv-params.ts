import { randomUUID } from 'node:crypto';
import { originOf } from '../../addresses';

/**
 * The `kv_transfer_params` of the concurrent vLLM P→D flows, as raw JSON text in the key order of vLLM's own
 * proxies (docs/protocols/vllm.md): upstream vLLM's Mooncake connector
 * (`examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py`) and the NIXL push connector
 * (`examples/disaggregated/disaggregated_serving/disagg_proxy_pushconnector_demo.py`).
 */

/** A fresh transfer id for one dispatch of a P/D pair (never reused by a retry: a stale transfer must not match). */
export function newKvTransferId(): string {
  return `xfer-${randomUUID()}`;
}

/** The Mooncake prefill's params: keep the blocks for the decode that names `transferId`. */
export function mooncakePrefillParams(transferId: string): string {
  return `{"do_remote_decode":true,"do_remote_prefill":false,"transfer_id":${JSON.stringify(transferId)}}`;
}

/** The Mooncake decode's params: where the prefill's bootstrap server is, which engine (DP rank) holds the KV, which transfer. */
export function mooncakeDecodeParams(bootstrapAddr: string, engineId: string, transferId: string): string {
  return (
    `{"do_remote_decode":false,"do_remote_prefill":true,"remote_bootstrap_addr":${JSON.stringify(bootstrapAddr)},` +
    `"remote_engine_id":${JSON.stringify(engineId)},"transfer_id":${JSON.stringify(transferId)}}`
  );
}

/** `http://host:port` of a prefill's bootstrap server (IPv6 literals bracketed), as the Mooncake proxy writes it. */
export function bootstrapAddr(ip: string, port: number): string {
  return originOf(ip, port);
}

/** The NIXL push prefill's params: the toy proxy's, plus the transfer id the prefill pairs its decode by. */
export function nixlPushPrefillParams(transferId: string): string {
  return (
    '{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,' +
    `"remote_port":null,"transfer_id":${JSON.stringify(transferId)}}`
  );
}

/** Where a NIXL push prefill is (its side channel) and how it is sharded: what its decode registers with. */
export interface NixlPushCoordinates {
  readonly engineId: string;
  readonly host: string;
  readonly port: number;
  readonly tpSize: number;
  readonly ppSize: number;
}

/** The NIXL push decode's params: the prefill's coordinates, no block ids (the decode registers its own blocks). */
export function nixlPushDecodeParams(c: NixlPushCoordinates, requestId: string, transferId: string): string {
  return (
    `{"do_remote_decode":false,"do_remote_prefill":true,"remote_engine_id":${JSON.stringify(c.engineId)},` +
    `"remote_host":${JSON.stringify(c.host)},"remote_port":${c.port},"tp_size":${c.tpSize},"pp_size":${c.ppSize},` +
    `"remote_request_id":${JSON.stringify(requestId)},"transfer_id":${JSON.stringify(transferId)}}`
  );
}

/**
 * The coordinates a push prefill returned in its answer's `kv_transfer_params` (`transfer_mode: "push"`), or
 * undefined when the answer is not a push prefill's (a pull connector answers without `transfer_mode`).
 */
export function nixlPushCoordinatesOf(params: unknown): NixlPushCoordinates | undefined {
  if (params === null || typeof params !== 'object') return undefined;
  const p = params as Record<string, unknown>;
  if (p['transfer_mode'] !== 'push') return undefined;
  const { remote_engine_id: engineId, remote_host: host, remote_port: port } = p;
  if (typeof engineId !== 'string' || typeof host !== 'string' || !Number.isInteger(port)) return undefined;
  const positive = (v: unknown) => (Number.isInteger(v) && (v as number) > 0 ? (v as number) : 1);
  return { engineId, host, port: port as number, tpSize: positive(p['tp_size']), ppSize: positive(p['pp_size']) };
}

export function sameCoordinates(a: NixlPushCoordinates, b: NixlPushCoordinates): boolean {
  return a.engineId === b.engineId && a.host === b.host && a.port === b.port && a.tpSize === b.tpSize && a.ppSize === b.ppSize;
}
