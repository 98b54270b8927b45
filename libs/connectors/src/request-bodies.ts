import type { EndpointRef } from '@triad/bus';
import { DEFAULT_SGLANG_BOOTSTRAP_PORT, type InferenceEngine } from '@triad/crd';
import { randomBootstrapRoom, serializeWith } from './json-text';
import type { MediaPart } from '@triad/request';

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

/** Body of the leg whose answer the client sees (aggregated, vLLM decode, E→PD), with usage injection. */
export function finalLegBody(body: Record<string, unknown>, stream: boolean, kvTransferParams?: string): string {
  const set = usageFields(body, stream);
  if (kvTransferParams === undefined) {
    return set === undefined ? JSON.stringify(body) : serializeWith(body, set, undefined);
  }
  return serializeWith(body, set, KV_PARAMS_KEY, `"kv_transfer_params":${kvTransferParams}`);
}

const KV_PARAMS_KEY = ['kv_transfer_params'] as const;
const PREFILL_DROP = ['stream_options', 'kv_transfer_params'] as const;
const PREFILL_KV_PARAMS =
  '"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,' +
    '"remote_host":null,"remote_port":null}';

/**
 * vLLM prefill body: one token, no stream, no stream_options; with `relayKvParams` it asks the KV connector
 * (NIXL, Mooncake, LMCache) to keep the blocks for a remote decode.
 */
export function vllmPrefillBody(body: Record<string, unknown>, relayKvParams: boolean): string {
  const set: Record<string, unknown> = { stream: false, max_tokens: 1 };
  if ('max_completion_tokens' in body) set['max_completion_tokens'] = 1;
  return serializeWith(body, set, PREFILL_DROP, relayKvParams ? PREFILL_KV_PARAMS : undefined);
}

/** Client fields an encoder request carries when present: the processing kwargs vLLM keys its cache with, and scheduling hints. */
const ENCODER_FIELDS = ['mm_processor_kwargs', 'media_io_kwargs', 'priority', 'session_id'] as const;

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
  body: Record<string, unknown>, parts: readonly MediaPart[], items: readonly EncoderItem[], consumerZmq?: string,
): string {
  const content = parts.map((p, i) => {
    const uuid = (items[i] as EncoderItem).uuid;
    return p.part['uuid'] === uuid ? p.part : { ...p.part, uuid };
  });
  const request: Record<string, unknown> = { model: body['model'], messages: [{ role: 'user', content }], stream: false };
  for (const field of ENCODER_FIELDS) if (body[field] !== undefined) request[field] = body[field];
  if (consumerZmq !== undefined) {
    request['ec_transfer_params'] = { consumer_zmq: consumerZmq, ec_items: items.map((i) => ({ transfer_id: i.transferId })) };
  }
  return JSON.stringify(request);
}

const BOOTSTRAP_KEYS = ['bootstrap_host', 'bootstrap_port', 'bootstrap_room', 'epd_bootstrap_addr'] as const;

/** How many sequences one SGLang request carries (completions with a prompt list, chat with n>1). */
function batchSize(body: Record<string, unknown>): number {
  const prompt = body['prompt'];
  if (Array.isArray(prompt) && prompt.length > 0 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) return prompt.length;
  const n = body['n'];
  return typeof n === 'number' && Number.isInteger(n) && n > 1 ? n : 1;
}

/** The bootstrap host as SGLang expects it (IPv6 literals in brackets). */
function bootstrapHost(ip: string): string {
  return ip.includes(':') && !ip.startsWith('[') ? `[${ip}]` : ip;
}

/** The bootstrap fields chosen for one SGLang attempt (the same text goes to P and D). */
export interface SglangBootstrap {
  readonly body: string;
  /** Rooms as decimal text, one per sequence. */
  readonly rooms: readonly string[];
}

/**
 * SGLang PD body, identical for prefill and decode: the client's body with usage injection plus
 * `bootstrap_host`, `bootstrap_port` and a fresh random 63-bit `bootstrap_room` (arrays for batches), written
 * as exact integers; `epdBootstrapAddr` adds SGLang EPD's encoder-group selector.
 */
export function sglangBody(
  body: Record<string, unknown>, stream: boolean, prefill: EndpointRef, epdBootstrapAddr?: string,
): SglangBootstrap {
  const host = JSON.stringify(bootstrapHost(prefill.ip));
  const port = String(prefill.bootstrapPort ?? DEFAULT_SGLANG_BOOTSTRAP_PORT);
  const n = batchSize(body);
  const rooms: string[] = [];
  for (let i = 0; i < n; i++) rooms.push(randomBootstrapRoom());
  let raw =
    n === 1
      ? `"bootstrap_host":${host},"bootstrap_port":${port},"bootstrap_room":${rooms[0] as string}`
      : `"bootstrap_host":[${new Array<string>(n).fill(host).join(',')}],"bootstrap_port":[${new Array<string>(n).fill(port).join(',')}],` +
        `"bootstrap_room":[${rooms.join(',')}]`;
  if (epdBootstrapAddr !== undefined) raw += `,"epd_bootstrap_addr":${JSON.stringify(epdBootstrapAddr)}`;
  return { body: serializeWith(body, usageFields(body, stream), BOOTSTRAP_KEYS, raw), rooms };
}
