import { request } from 'undici';
import type { SimContext } from '../sim-context';
import { embeddingBytes, EcUnavailableError, EMBEDDING_HIDDEN, type EcConnector, type EcRequest } from './ec-connector';
import { EC_PUSH_PATH, MooncakeReceiver } from './ec-mooncake-receiver';
import type { DistinctItem } from './mm-features';

const PUSH_TIMEOUT_MS = 10_000;
const DEFAULT_PUSH_WAIT_MS = 60_000;
const NO_FIELDS: Readonly<Record<string, unknown>> = Object.freeze({});

/**
 * The transfer id of item `index` (vLLM `_request_transfer_id`): `ec_items[index]` when its `mm_hash` is absent or
 * names this item, else the entry whose `mm_hash` does; undefined when the request names none.
 */
export function requestTransferId(params: Record<string, unknown> | undefined, index: number, identifier: string): string | undefined {
  const items = Array.isArray(params?.['ec_items']) ? (params['ec_items'] as unknown[]) : [];
  const usable = (v: unknown): v is Record<string, unknown> =>
    !!v && typeof v === 'object' && !!(v as Record<string, unknown>)['transfer_id'];
  const at = items[index];
  const named = (v: Record<string, unknown>) => v['mm_hash'] === undefined || v['mm_hash'] === null || v['mm_hash'] === identifier;
  if (usable(at) && named(at)) return String(at['transfer_id']);
  const byHash = items.find((v) => usable(v) && v['mm_hash'] === identifier) as Record<string, unknown> | undefined;
  return byHash ? String(byHash['transfer_id']) : undefined;
}

/** `tcp://host:port` → `http://host:port` of the sim's control listener; undefined when malformed. */
function controlUrl(consumerZmq: string): string | undefined {
  const m = /^tcp:\/\/(\[[^\]]+\]|[^:/[\]]+):(\d{1,5})$/.exec(consumerZmq);
  return m && Number(m[2]) > 0 && Number(m[2]) < 65536 ? `http://${m[1]}:${m[2]}${EC_PUSH_PATH}` : undefined;
}

/**
 * ECMooncakeConnector (vLLM #41567). The encoder pushes only when its request carries
 * `ec_transfer_params.consumer_zmq`: each item `i` goes under `ec_items[i].transfer_id` (else `<request id>:<i>`,
 * which no consumer can match) to that control address. A consumer has one control listener per DP rank and
 * waits, on the rank the request runs on, for the transfer its `ec_items` name for each item, up to the push wait
 * timeout; then the request fails (there is no local-encode fallback for a push that never came).
 */
export class MooncakeEcConnector implements EcConnector {
  readonly #receivers: MooncakeReceiver[] = [];

  constructor(
    private readonly ctx: SimContext,
    /** Consumers (prefill, both) listen; an encoder only pushes. */
    private readonly consumer: boolean,
  ) {}

  get controlAddresses(): readonly string[] | undefined {
    return this.consumer ? this.#receivers.map((r) => r.address) : undefined;
  }

  async start(): Promise<void> {
    if (!this.consumer) return;
    const base = this.ctx.options.ecControlPort ?? 0;
    try {
      for (const rank of this.ctx.ranks) {
        const port = base > 0 ? base + rank.index : 0;
        this.#receivers.push(await MooncakeReceiver.start(this.ctx.counters, this.ctx.host, this.ctx.advertiseHost, port));
      }
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.#receivers.splice(0).map((r) => r.close()));
  }

  async publish(items: readonly DistinctItem[], req: EcRequest): Promise<ReadonlyMap<string, Readonly<Record<string, unknown>>>> {
    const fields = new Map(items.map((i) => [i.feature.identifier, NO_FIELDS] as const));
    const consumerZmq = req.params?.['consumer_zmq'];
    if (typeof consumerZmq !== 'string' || consumerZmq === '') return fields;
    const url = controlUrl(consumerZmq);
    const pushed = new Set<string>();
    const pushes: Promise<void>[] = [];
    for (const { feature, indices } of items) {
      for (const index of indices) {
        const transferId = requestTransferId(req.params, index, feature.identifier) ?? `${req.requestId}:${index}`;
        if (pushed.has(transferId)) continue;
        pushed.add(transferId);
        const body = {
          transfer_id: transferId,
          mm_hash: feature.identifier,
          nbytes: embeddingBytes(feature.tokens),
          shape: [feature.tokens, EMBEDDING_HIDDEN],
          dtype: 'float16',
        };
        pushes.push(this.#push(url, consumerZmq, body, req));
      }
    }
    await Promise.all(pushes);
    return fields;
  }

  async #push(url: string | undefined, consumerZmq: string, body: Record<string, unknown>, req: EcRequest): Promise<void> {
    if (url !== undefined && req.losePushes !== true) {
      try {
        const res = await request(url, {
          method: 'POST',
          dispatcher: this.ctx.http,
          headers: { 'content-type': 'application/json', ...req.headers },
          body: JSON.stringify(body),
          headersTimeout: PUSH_TIMEOUT_MS,
          bodyTimeout: PUSH_TIMEOUT_MS,
        });
        await res.body.text();
        if (res.statusCode === 200) {
          this.ctx.counters.inc('pushesSent');
          return;
        }
      } catch (err) {
        this.ctx.logger?.debug({ err, consumerZmq, transferId: body['transfer_id'] }, 'EC push failed');
      }
    }
    this.ctx.counters.inc('pushFailures');
  }

  async acquire(items: readonly DistinctItem[], req: EcRequest): Promise<ReadonlySet<string>> {
    const receiver = this.#receivers[req.rank.index];
    if (!receiver || items.length === 0) return new Set();
    const timeoutMs = this.ctx.options.ecPushWaitTimeoutMs ?? DEFAULT_PUSH_WAIT_MS;
    // The first occurrence's transfer carries a repeated item; the others' pushes are cancelled when it is done.
    const wanted = items.map(({ feature, indices }) => {
      const ids = indices.map((i) => requestTransferId(req.params, i, feature.identifier) ?? `${req.requestId}:${i}`);
      return { identifier: feature.identifier, first: ids[0], rest: ids.slice(1) };
    });
    if (wanted.some((w) => !receiver.has(w.first, w.identifier))) req.onWait?.();
    const outcomes = await Promise.all(wanted.map((w) => receiver.wait(w.first, w.identifier, timeoutMs, req.signal)));
    for (const w of wanted) for (const id of w.rest) receiver.discard(id);
    const missing = wanted.filter((_, i) => outcomes[i] !== 'arrived');
    if (missing.length > 0) {
      this.ctx.counters.inc('pushWaitTimeouts', outcomes.filter((o) => o === 'timeout').length);
      const named = missing.map((w) => `${w.identifier} (transfer_id ${w.first})`).join(', ');
      throw new EcUnavailableError(`no push of ${named} arrived within ${timeoutMs} ms`);
    }
    return new Set(wanted.map((w) => w.identifier));
  }
}
