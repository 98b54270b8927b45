import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { SimCounters } from '../counters';
import { listen } from '../http/listen';

/** Where an encoder delivers a push on a consumer's control listener. */
export const EC_PUSH_PATH = '/sim/ec/push';

/** Unclaimed pushes are dropped after vLLM's lease (300 s), oldest first beyond the bound. */
const LEASE_MS = 300_000;
const INBOX_LIMIT = 4_096;
const BODY_LIMIT = 64 * 1024;

interface Arrived {
  readonly mmHash: string;
  readonly at: number;
}

export type WaitOutcome = 'arrived' | 'timeout' | 'aborted';

/**
 * One DP rank's Mooncake control listener of an EC consumer (the sim's stand-in for the ZMQ reservation channel
 * plus the TransferEngine write): pushes land in this rank's inbox under their `transfer_id`, and requests running
 * on this rank wait there for the items they need.
 */
export class MooncakeReceiver {
  readonly #inbox = new Map<string, Arrived>();
  readonly #waiters = new Map<string, Set<() => void>>();
  readonly #server: Server;
  #port = 0;

  private constructor(
    private readonly counters: SimCounters,
    readonly advertiseHost: string,
  ) {
    this.#server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => this.#handle(req, res));
  }

  static async start(counters: SimCounters, host: string, advertiseHost: string, port: number): Promise<MooncakeReceiver> {
    const receiver = new MooncakeReceiver(counters, advertiseHost);
    receiver.#port = await listen(receiver.#server, host, port);
    return receiver;
  }

  /** `tcp://host:port`, the form vLLM's `consumer_zmq` and `--ec-consumer-zmq-addrs` use. */
  get address(): string {
    return `tcp://${this.advertiseHost.includes(':') ? `[${this.advertiseHost}]` : this.advertiseHost}:${this.#port}`;
  }

  /** Takes the push of `transferId` for `mmHash` if it is here; else waits for it up to `timeoutMs`. */
  wait(transferId: string, mmHash: string, timeoutMs: number, signal: AbortSignal): Promise<WaitOutcome> {
    if (this.#take(transferId, mmHash)) return Promise.resolve('arrived');
    return new Promise((resolve) => {
      const done = (outcome: WaitOutcome) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        const set = this.#waiters.get(transferId);
        set?.delete(check);
        if (set?.size === 0) this.#waiters.delete(transferId);
        resolve(outcome);
      };
      const check = () => {
        if (this.#take(transferId, mmHash)) done('arrived');
      };
      const onAbort = () => done('aborted');
      const timer = setTimeout(() => done('timeout'), timeoutMs);
      signal.addEventListener('abort', onAbort, { once: true });
      let set = this.#waiters.get(transferId);
      if (!set) this.#waiters.set(transferId, (set = new Set()));
      set.add(check);
    });
  }

  /** Whether a push for `transferId` and `mmHash` is waiting to be taken (without taking it). */
  has(transferId: string, mmHash: string): boolean {
    return this.#inbox.get(transferId)?.mmHash === mmHash;
  }

  /** Drops a push nobody will take (a finished request's other transfers), as vLLM cancels its reservations. */
  discard(transferId: string): void {
    this.#inbox.delete(transferId);
  }

  #take(transferId: string, mmHash: string): boolean {
    if (!this.has(transferId, mmHash)) return false;
    this.#inbox.delete(transferId);
    return true;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= BODY_LIMIT) chunks.push(c);
    });
    req.on('end', () => {
      const answer = (status: number, body: object) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.method !== 'POST' || req.url !== EC_PUSH_PATH) return answer(404, { error: `no route ${req.method} ${req.url}` });
      let push: Record<string, unknown> | undefined;
      try {
        push = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        push = undefined;
      }
      const transferId = push?.['transfer_id'];
      const mmHash = push?.['mm_hash'];
      if (size > BODY_LIMIT || typeof transferId !== 'string' || typeof mmHash !== 'string' || transferId === '' || mmHash === '') {
        return answer(400, { error: 'a push needs transfer_id and mm_hash strings' });
      }
      this.#accept(transferId, mmHash);
      answer(200, { transfer_id: transferId, ready: true });
    });
  }

  #accept(transferId: string, mmHash: string): void {
    const now = Date.now();
    for (const [id, arrived] of this.#inbox) {
      if (arrived.at > now - LEASE_MS && this.#inbox.size < INBOX_LIMIT) break;
      this.#inbox.delete(id);
    }
    this.#inbox.delete(transferId);
    this.#inbox.set(transferId, { mmHash, at: now });
    this.counters.inc('pushesReceived');
    for (const check of [...(this.#waiters.get(transferId) ?? [])]) check();
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}
