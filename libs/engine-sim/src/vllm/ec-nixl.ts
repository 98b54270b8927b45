import { request } from 'undici';
import type { Exchange, RouteHandler } from '../http/router';
import { sendJson } from '../http/respond';
import type { SimContext } from '../sim-context';
import { embeddingBytes, EcUnavailableError, type EcConnector, type EcRequest } from './ec-connector';
import type { DistinctItem } from './mm-features';

/**
 * The NIXL side channel of ECCPUConnector, as HTTP on the encoder's own port (as the KV pull is): real NIXL does
 * a ZMQ handshake on `peer_host:peer_port` and an RDMA read; here the consumer POSTs `{mm_hash, size_bytes}`.
 */
export const EC_PULL_PATH = '/sim/ec/pull';

/**
 * Encoders of this process that answer in-process pulls (`nixlSideChannel: 'in-process'`), by the address they
 * announce in `peer_host:peer_port`. Process-wide like the port space it mirrors; entries leave on close.
 */
const inProcessEncoders = new Map<string, NixlEcConnector>();

/** Encodings an encoder keeps for pulls; the oldest are evicted first (vLLM's region is FIFO-evicted too). */
const HELD_CAPACITY = 16_384;
const PULL_TIMEOUT_MS = 10_000;

function asRecord(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/**
 * ECCPUConnector with P2P NIXL (vLLM #47941). The encoder holds each encoding and announces, per identifier,
 * `{peer_host, peer_port, size_bytes}` in its answer. A consumer reads `ec_transfer_params[<its identifier>]`:
 * no entry (or one without a peer) means a local encode; a `size_bytes` other than the item's size fails the
 * request; otherwise it pulls, and a failed pull means a local encode when the request carries the media.
 */
export class NixlEcConnector implements EcConnector {
  readonly #held = new Map<string, number>();
  #offeredAs: string | undefined;

  constructor(private readonly ctx: SimContext) {}

  /** An encoder's answer to a pull: served (true) or refused (counted on the encoder either way). */
  #answerPull(id: unknown, size: unknown): { ok: true } | { ok: false; status: 404 | 409; reason: string } {
    const held = typeof id === 'string' ? this.#held.get(id) : undefined;
    if (held !== undefined && held === size) {
      this.ctx.counters.inc('ecPullsServed');
      return { ok: true };
    }
    this.ctx.counters.inc('ecPullsRejected');
    if (held === undefined) return { ok: false, status: 404, reason: `no encoding held for ${String(id)}` };
    return { ok: false, status: 409, reason: `size_bytes ${String(size)} is not ${held}` };
  }

  async publish(items: readonly DistinctItem[]): Promise<ReadonlyMap<string, Readonly<Record<string, unknown>>>> {
    const fields = new Map<string, Readonly<Record<string, unknown>>>();
    for (const { feature } of items) {
      const size = embeddingBytes(feature.tokens);
      this.#held.delete(feature.identifier);
      this.#held.set(feature.identifier, size);
      fields.set(feature.identifier, { peer_host: this.ctx.advertiseHost, peer_port: this.ctx.port, size_bytes: size });
    }
    while (this.#held.size > HELD_CAPACITY) this.#held.delete(this.#held.keys().next().value as string);
    return fields;
  }

  /** Encoder side of the side channel. */
  readonly pullHandler: RouteHandler = (ex: Exchange) => {
    const body = asRecord(ex.body.ok ? ex.body.value : undefined);
    const answer = this.#answerPull(body?.['mm_hash'], body?.['size_bytes']);
    if (answer.ok) sendJson(ex.res, 200, JSON.stringify({ mm_hash: body?.['mm_hash'], size_bytes: body?.['size_bytes'] }));
    else sendJson(ex.res, answer.status, JSON.stringify({ error: answer.reason }));
  };

  async acquire(items: readonly DistinctItem[], req: EcRequest): Promise<ReadonlySet<string>> {
    const found = new Set<string>();
    const pulls: Promise<void>[] = [];
    for (const { feature } of items) {
      const entry = asRecord(req.params?.[feature.identifier]);
      // Not announced by any producer: vLLM falls through to a local encode.
      if (!entry || !('peer_host' in entry || 'peer_port' in entry)) continue;
      const expected = embeddingBytes(feature.tokens);
      if (entry['size_bytes'] !== expected) {
        this.ctx.counters.inc('ecHandlesInvalid');
        const announced = JSON.stringify(entry['size_bytes']);
        throw new EcUnavailableError(`announced size_bytes ${announced} for ${feature.identifier} is not ${expected}`);
      }
      pulls.push(this.#pull(feature.identifier, entry, expected, req).then((ok) => void (ok && found.add(feature.identifier))));
    }
    await Promise.all(pulls);
    return found;
  }

  async #pull(id: string, entry: Record<string, unknown>, size: number, req: EcRequest): Promise<boolean> {
    const { peer_host: host, peer_port: port } = entry;
    const peer = this.ctx.options.nixlSideChannel === 'in-process' ? inProcessEncoders.get(`${String(host)}:${String(port)}`) : undefined;
    if (peer !== undefined) {
      this.ctx.counters.inc('ecPullsInProcess');
      if (peer.#answerPull(id, size).ok) {
        this.ctx.counters.inc('ecPullsReceived');
        return true;
      }
    } else if (typeof host === 'string' && typeof port === 'number' && Number.isInteger(port)) {
      try {
        const res = await request(`http://${host.includes(':') ? `[${host}]` : host}:${port}${EC_PULL_PATH}`, {
          method: 'POST',
          dispatcher: this.ctx.http,
          headers: { 'content-type': 'application/json', ...req.headers },
          body: JSON.stringify({ mm_hash: id, size_bytes: size }),
          headersTimeout: PULL_TIMEOUT_MS,
          bodyTimeout: PULL_TIMEOUT_MS,
          signal: req.signal,
        });
        const text = await res.body.text();
        if (res.statusCode === 200) {
          this.ctx.counters.inc('ecPullsReceived');
          return true;
        }
        this.ctx.logger?.debug({ status: res.statusCode, body: text, mmHash: id }, 'EC pull refused');
      } catch (err) {
        this.ctx.logger?.debug({ err, mmHash: id }, 'EC pull failed');
      }
    }
    this.ctx.counters.inc('ecPullsFailed');
    return false;
  }

  /** With `nixlSideChannel: 'in-process'`, the encoder also answers pulls of consumers in this process directly. */
  async start(): Promise<void> {
    if (this.ctx.options.nixlSideChannel !== 'in-process' || this.ctx.role !== 'encode') return;
    this.#offeredAs = `${this.ctx.advertiseHost}:${this.ctx.port}`;
    inProcessEncoders.set(this.#offeredAs, this);
  }

  async close(): Promise<void> {
    if (this.#offeredAs !== undefined && inProcessEncoders.get(this.#offeredAs) === this) inProcessEncoders.delete(this.#offeredAs);
  }
}
