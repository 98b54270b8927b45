import type { EndpointRef } from '@triad/bus';
import { DEFAULT_SGLANG_BOOTSTRAP_PORT, type InferenceEngine } from '@triad/crd';
import { urlHost } from './addresses';
import { randomBootstrapRoom, scalarJson, serializeWith, valueJson, type JsonFragments } from './json-text';
import { completionPromptCount, generatePromptCount, type MediaPart } from '@triad/request';

/**
 * Whether the client itself asked for the final usage chunk of a stream. vLLM turns `include_usage` on as soon
 * as a `stream_options` object is present; SGLang only when it is true (docs/protocols/openai.md).
 */
export function clientWantsUsage(body: Record<string, unknown>, engine: InferenceEngine): boolean {
  const options = body['stream_options'];
  if (options === null || typeof options !== 'object') return false;
  const include = (options as { include_usage?: unknown }).include_usage;
  return include === true || (include === undefined && engine === 'vLLM');
}

/**
 * Fields that make the engine stream usage for accounting: `stream_options.include_usage` on every stream
 * (the chunk is removed again when the client did not ask). Non-stream answers always carry usage.
 */
function usageFields(body: Record<string, unknown>, stream: boolean): Record<string, unknown> | undefined {
  if (!stream) return undefined;
  const options = body['stream_options'];
  const base = options !== null && typeof options === 'object' ? (options as Record<string, unknown>) : undefined;
  return { stream_options: base === undefined ? INCLUDE_USAGE : { ...base, include_usage: true } };
}

const INCLUDE_USAGE = Object.freeze({ include_usage: true });

/**
 * Body of the leg whose answer the client sees (aggregated, vLLM decode, E→PD), with usage injection;
 * `routedDpRank` pins an SGLang engine's DP rank (aggregated legs of DP engines). `fragments`: the text of the
 * body's values another leg of the same body already made (its prefill's).
 */
export function finalLegBody(
  body: Record<string, unknown>,
  stream: boolean,
  kvTransferParams?: string,
  routedDpRank?: number,
  fragments?: JsonFragments,
): string {
  const set = usageFields(body, stream);
  if (routedDpRank !== undefined) return serializeWith(body, { ...set, routed_dp_rank: routedDpRank }, undefined, undefined, fragments);
  if (kvTransferParams === undefined) {
    return set === undefined && fragments === undefined ? JSON.stringify(body) : serializeWith(body, set, undefined, undefined, fragments);
  }
  return serializeWith(body, set, KV_PARAMS_KEY, `"kv_transfer_params":${kvTransferParams}`, fragments);
}

/** The client pinned an SGLang DP rank itself (body or header): then the gateway adds none. */
export function clientPinsDpRank(body: Record<string, unknown>, headers: Readonly<Record<string, unknown>>): boolean {
  return body['routed_dp_rank'] != null || body['data_parallel_rank'] != null || headers['x-data-parallel-rank'] !== undefined;
}

const KV_PARAMS_KEY = ['kv_transfer_params'] as const;
// min_tokens must not exceed the prefill's one token (vLLM refuses the request otherwise); the decode keeps it.
const PREFILL_DROP = ['stream_options', 'kv_transfer_params', 'min_tokens', 'min_completion_tokens'] as const;
/** The prefill's `kv_transfer_params` of vLLM's NIXL toy proxy (also what vllm-ascend's Mooncake connector reads). */
export const NIXL_PREFILL_KV_PARAMS =
  '{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}';

/**
 * vLLM prefill body: one token, no stream, no stream_options; with `kvParams` it asks the KV connector to keep the
 * blocks for a remote decode: `true` sends the NIXL toy proxy's params (NIXL, vllm-ascend Mooncake, LMCache), a
 * string sends that raw JSON object (upstream vLLM Mooncake and NIXL push add a `transfer_id`). `n` becomes 1: vLLM
 * runs each sample as a child request that keeps its own blocks for a remote decode, and answers the parameters of
 * one child only, so the other samples' blocks would stay held until the prefill's lease ends (the samples share the
 * prompt's KV; the decode keeps the client's `n`).
 */
export function vllmPrefillBody(body: Record<string, unknown>, kvParams: boolean | string, fragments?: JsonFragments): string {
  const set: Record<string, unknown> = { stream: false, max_tokens: 1 };
  if ('max_completion_tokens' in body) set['max_completion_tokens'] = 1;
  if ('n' in body) set['n'] = 1;
  const raw = kvParams === true ? NIXL_PREFILL_KV_PARAMS : kvParams === false ? undefined : kvParams;
  return serializeWith(body, set, PREFILL_DROP, raw === undefined ? undefined : `"kv_transfer_params":${raw}`, fragments);
}

const RELEASE_DROP = ['stream_options', 'kv_transfer_params', 'min_tokens'] as const;

/**
 * vLLM release body: the decode body cut to one token, not streamed, with the prefill's `kv_transfer_params`
 * verbatim. A decode that gets it reads the blocks the prefill kept for this request (or, aborted before it
 * schedules it, tells the prefill to free them), which is the only way vLLM offers a router to make a prefill let go
 * of KV it holds for a remote decode before `VLLM_NIXL_ABORT_REQUEST_TIMEOUT`. `min_tokens` goes (it must not exceed
 * one token), `n` becomes 1.
 */
export function vllmReleaseBody(body: Record<string, unknown>, kvTransferParams: string): string {
  const set: Record<string, unknown> = { stream: false, max_tokens: 1 };
  if ('max_completion_tokens' in body) set['max_completion_tokens'] = 1;
  if ('n' in body) set['n'] = 1;
  return serializeWith(body, set, RELEASE_DROP, `"kv_transfer_params":${kvTransferParams}`);
}

/** One item of an encoder request: its uuid, and for a push connector its transfer id. */
export interface EncoderItem {
  readonly uuid: string;
  readonly transferId: string | undefined;
}

/**
 * Body of one vLLM encoder request (vLLM's newest EPD proxy): one user message holding only the group's media parts,
 * each with its `uuid`; `stream: false` and no `max_tokens` (an encoder-only instance never samples); the client's
 * `mm_processor_kwargs`, `media_io_kwargs`, `priority` and `session_id`; and for a push EC connector
 * `ec_transfer_params {consumer_zmq, ec_items: [{transfer_id}]}`, one entry per part in order.
 */
export function encoderBody(
  body: Record<string, unknown>,
  parts: readonly MediaPart[],
  items: readonly EncoderItem[],
  consumerZmq?: string,
): string {
  // Written as JSON.stringify writes the request object (model, messages, stream, the fields, the params, in that
  // order; a value JSON leaves out leaves its key out), without building it: each JSON.stringify call costs about
  // 2,000 instructions before it writes a byte, and a part copied with its uuid (a spread) about 5,000 more.
  let content = '';
  for (let i = 0; i < parts.length; i++) content += `${i === 0 ? '' : ','}${partWithUuid(parts[i].part, items[i].uuid)}`;
  const model = valueJson(body['model']);
  let out = `{${model === undefined ? '' : `"model":${model},`}"messages":[{"role":"user","content":[${content}]}],"stream":false`;
  // The client fields an encoder request carries when present (the processing kwargs vLLM keys its cache with, and
  // scheduling hints), one by one: a constant key is a named load, a key taken from a list a megamorphic one.
  out += member('mm_processor_kwargs', body['mm_processor_kwargs']);
  out += member('media_io_kwargs', body['media_io_kwargs']);
  out += member('priority', body['priority']);
  out += member('session_id', body['session_id']);
  if (consumerZmq !== undefined) {
    out += `,"ec_transfer_params":${JSON.stringify({ consumer_zmq: consumerZmq, ec_items: items.map((i) => ({ transfer_id: i.transferId })) })}`;
  }
  return `${out}}`;
}

/** `,"key":value`, or nothing for a value JSON leaves out. */
function member(key: string, value: unknown): string {
  if (value === undefined) return '';
  const text = valueJson(value);
  return text === undefined ? '' : `,"${key}":${text}`;
}

/**
 * `JSON.stringify({ ...part, uuid })`: the part as it is when it carries the uuid, the uuid appended when it carries
 * none (where the copy would put it, last), the copy only to replace a uuid of its own in place.
 */
function partWithUuid(part: Record<string, unknown>, uuid: string): string {
  if (part['uuid'] === uuid) return JSON.stringify(part);
  if (Object.hasOwn(part, 'uuid')) return JSON.stringify({ ...part, uuid });
  const text = JSON.stringify(part);
  return `${text.length === 2 ? '{' : `${text.slice(0, -1)},`}"uuid":${scalarJson(uuid)}}`;
}

/**
 * Fields the router owns on SGLang PD legs: a client's copies are dropped first (its DP ranks name ranks of engines
 * it did not choose, and a prefill and its decode have separate rank spaces).
 */
const PD_OWNED_KEYS = [
  'bootstrap_host',
  'bootstrap_port',
  'bootstrap_room',
  'routed_dp_rank',
  'data_parallel_rank',
  'disagg_prefill_dp_rank',
] as const;

/**
 * How many prompts one SGLang request carries: a completions `prompt` list of texts or of token-id lists, else as a
 * `/generate` body counts them (`generatePromptCount`); at least 1, so an empty batch still gets a room (SGLang
 * spreads a scalar room over the batch, here none). (`n > 1` never gets here under PD: the connector sends a request
 * per sample, see docs/protocols/sglang.md.)
 */
export function sglangBatchSize(body: Record<string, unknown>): number {
  const prompts = completionPromptCount(body);
  return prompts > 1 ? prompts : Math.max(1, generatePromptCount(body));
}

/** Data-parallel ranks chosen for one SGLang PD try (each absent when that engine has no DP ranks to pick). */
export interface SglangDpRanks {
  readonly prefill?: number;
  readonly decode?: number;
}

/** The bodies of one SGLang PD try: identical text for both legs unless DP ranks differ per leg. */
export interface SglangBootstrap {
  readonly prefillBody: string;
  readonly decodeBody: string;
  /** Rooms as decimal text, one per prompt. */
  readonly rooms: readonly string[];
}

/**
 * SGLang PD bodies: the client's body with usage injection plus `bootstrap_host`, `bootstrap_port` and a fresh
 * random 63-bit `bootstrap_room` (lists for batches), written as exact integers. With DP ranks the prefill gets
 * `routed_dp_rank` = its rank, and the decode `routed_dp_rank` = its own rank and `disagg_prefill_dp_rank` = the
 * prefill's (so it need not derive or look up where the KV is).
 */
export function sglangBody(body: Record<string, unknown>, stream: boolean, prefill: EndpointRef, ranks?: SglangDpRanks): SglangBootstrap {
  const host = JSON.stringify(urlHost(prefill.ip));
  const port = String(prefill.bootstrapPort ?? DEFAULT_SGLANG_BOOTSTRAP_PORT);
  const n = sglangBatchSize(body);
  const rooms: string[] = [];
  for (let i = 0; i < n; i++) rooms.push(randomBootstrapRoom());
  const raw =
    n === 1
      ? `"bootstrap_host":${host},"bootstrap_port":${port},"bootstrap_room":${rooms[0]}`
      : `"bootstrap_host":[${new Array<string>(n).fill(host).join(',')}],"bootstrap_port":[${new Array<string>(n).fill(port).join(',')}],` +
        `"bootstrap_room":[${rooms.join(',')}]`;
  const set = usageFields(body, stream);
  const p = ranks?.prefill;
  const d = ranks?.decode;
  if (p === undefined && d === undefined) {
    const same = serializeWith(body, set, PD_OWNED_KEYS, raw);
    return { prefillBody: same, decodeBody: same, rooms };
  }
  const prefillRaw = p === undefined ? raw : `${raw},"routed_dp_rank":${p}`;
  let decodeRaw = d === undefined ? raw : `${raw},"routed_dp_rank":${d}`;
  if (p !== undefined) decodeRaw += `,"disagg_prefill_dp_rank":${p}`;
  return {
    prefillBody: serializeWith(body, set, PD_OWNED_KEYS, prefillRaw),
    decodeBody: serializeWith(body, set, PD_OWNED_KEYS, decodeRaw),
    rooms,
  };
}
