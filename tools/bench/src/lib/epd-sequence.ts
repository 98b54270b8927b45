import { hash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { median } from './stats';
import { RawHttpConnection } from './raw-http';

/**
 * The baseline of the EPD added-latency figure: one vLLM E→P→D request at a time sent straight to the three engines
 * by a client that does what a router costing nothing would do (docs/performance.md § The EPD added-latency baseline). It sends each stage
 * the request the gateway sends it (libs/connectors, vllm-epd with the NIXL EC connector and the `*_embeds`
 * rewrite): E the image part with its uuid; P the text and an `image_embeds` metadata reference with the encoder's
 * entry in `ec_transfer_params`, one token and the NIXL toy proxy's `kv_transfer_params`; D the same consumer body
 * with the prefill's `kv_transfer_params`. So P pulls the encoder output and D pulls the KV blocks, as they do
 * behind the gateway. A request cannot be replayed (a decode's pull frees the blocks), hence a client and not wrk.
 */

const PATH = '/v1/chat/completions';
/** The NIXL toy proxy's prefill params (request-bodies.ts `NIXL_PREFILL_KV_PARAMS`): keep the blocks for a decode. */
const PREFILL_KV_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

/** The client's request: one user message of a text and one image URL, answered as JSON. */
export interface EpdRequest {
  readonly model: string;
  readonly text: string;
  readonly imageUrl: string;
  readonly maxTokens: number;
}

/** Base URLs of the three engines. */
export interface EpdStages {
  readonly encode: string;
  readonly prefill: string;
  readonly decode: string;
}

/** Milliseconds from each stage's write to its answer's last byte; `total` is their sum (the client's own work between stages is not in it). */
export interface StageTimes {
  readonly encode: number;
  readonly prefill: number;
  readonly decode: number;
  readonly total: number;
}

/** The bodies of one E→P→D request, as sent (for checks against what the gateway sends). */
export interface SentBodies {
  readonly encode: string;
  readonly prefill: string;
  readonly decode: string;
}

type Json = Record<string, unknown>;

/** The encoder's entry for the item and its metadata flattened one level, as the `*_embeds` part takes it. */
function encoderEntry(answer: string, uuid: string): { hash: string; entry: Json; metadata: Json } {
  const params = (JSON.parse(answer) as Json)['ec_transfer_params'] as Record<string, Json> | null | undefined;
  const entries = Object.entries(params ?? {});
  if (entries.length !== 1)
    throw new Error(`the encoder answered ${entries.length} ec_transfer_params entries for one item (uuid ${uuid})`);
  const [ecHash, entry] = entries[0];
  const metadata: Json = {};
  for (const [field, value] of Object.entries((entry['metadata'] ?? {}) as Record<string, unknown[]>)) {
    metadata[field] = value.flatMap((v) => (Array.isArray(v) ? (v as unknown[]) : [v]));
  }
  return { hash: ecHash, entry, metadata };
}

/** One client talking to the three engines over one kept-alive connection each. */
export class EpdSequenceClient {
  readonly #e: RawHttpConnection;
  readonly #p: RawHttpConnection;
  readonly #d: RawHttpConnection;
  readonly #request: EpdRequest;
  readonly #uuid: string;
  readonly #encodeBody: string;
  #next = 0;

  constructor(stages: EpdStages, request: EpdRequest) {
    this.#e = new RawHttpConnection(stages.encode);
    this.#p = new RawHttpConnection(stages.prefill);
    this.#d = new RawHttpConnection(stages.decode);
    this.#request = request;
    // The gateway's item uuid: SHA-256 hex of the URL (vLLM's proxy does the same).
    this.#uuid = hash('sha256', request.imageUrl, 'hex');
    const image = { type: 'image_url', image_url: { url: request.imageUrl }, uuid: this.#uuid };
    this.#encodeBody = JSON.stringify({ model: request.model, messages: [{ role: 'user', content: [image] }], stream: false });
  }

  /** One E→P→D request; throws when a stage does not answer 200 or a hand-off is missing. */
  async send(): Promise<{ times: StageTimes; bodies: SentBodies }> {
    const id = `bench-epd-${++this.#next}`;
    const e = await this.#stage(this.#e, 'encode', this.#encodeBody, `${id}:0:e`);
    const item = encoderEntry(e.body, this.#uuid);
    const r = this.#request;
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text: r.text },
          { type: 'image_embeds', image_embeds: item.metadata, uuid: this.#uuid },
        ],
      },
    ];
    const ec = { [item.hash]: item.entry };
    const prefillBody = JSON.stringify({
      model: r.model,
      messages,
      ec_transfer_params: ec,
      stream: false,
      max_tokens: 1,
      kv_transfer_params: PREFILL_KV_PARAMS,
    });
    const p = await this.#stage(this.#p, 'prefill', prefillBody, id);
    const kv = (JSON.parse(p.body) as Json)['kv_transfer_params'];
    if (kv === undefined || kv === null) throw new Error('the prefill answered without kv_transfer_params: its decode would prefill again');
    const decodeBody = JSON.stringify({
      model: r.model,
      messages,
      max_tokens: r.maxTokens,
      stream: false,
      ec_transfer_params: ec,
      kv_transfer_params: kv,
    });
    const d = await this.#stage(this.#d, 'decode', decodeBody, id);
    return {
      times: { encode: e.ms, prefill: p.ms, decode: d.ms, total: e.ms + p.ms + d.ms },
      bodies: { encode: this.#encodeBody, prefill: prefillBody, decode: decodeBody },
    };
  }

  close(): void {
    this.#e.close();
    this.#p.close();
    this.#d.close();
  }

  async #stage(conn: RawHttpConnection, stage: string, body: string, requestId: string) {
    const answer = await conn.post(PATH, body, { 'x-request-id': requestId });
    if (answer.status !== 200) throw new Error(`${stage} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    return answer;
  }
}

/** p50s of a timed run of {@link EpdSequenceClient}. */
export interface EpdSequenceResult {
  readonly requests: number;
  /** p50 of each stage's own time. */
  readonly encodeP50ms: number;
  readonly prefillP50ms: number;
  readonly decodeP50ms: number;
  /** p50 of the per-request sum of the three: the baseline a router's p50 is compared with. */
  readonly totalP50ms: number;
  /** The bodies of the last request (its encode and prefill bodies can be replayed: an EC handle stays pullable). */
  readonly bodies: SentBodies;
}

/** Sends E→P→D requests one after another for `warmupSec` (not counted), then for `durationSec`. */
export async function measureEpdSequence(
  stages: EpdStages,
  request: EpdRequest,
  durationSec: number,
  warmupSec: number,
): Promise<EpdSequenceResult> {
  const client = new EpdSequenceClient(stages, request);
  try {
    const warmEnd = performance.now() + warmupSec * 1000;
    while (performance.now() < warmEnd) await client.send();
    const times: StageTimes[] = [];
    let last = await client.send();
    const end = performance.now() + durationSec * 1000;
    while (performance.now() < end) {
      last = await client.send();
      times.push(last.times);
    }
    return {
      bodies: last.bodies,
      requests: times.length,
      encodeP50ms: median(times.map((t) => t.encode)),
      prefillP50ms: median(times.map((t) => t.prefill)),
      decodeP50ms: median(times.map((t) => t.decode)),
      totalP50ms: median(times.map((t) => t.total)),
    };
  } finally {
    client.close();
  }
}
