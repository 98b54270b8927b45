// Request and answer shapes of vLLM's newest EPD proxy (examples/disaggregated/disaggregated_encoder/
// disagg_epd_proxy.py), written out by hand for the simulator's tests; see docs/engine-sim.md.
import { createHash } from 'node:crypto';
import type { SimEngineHandle } from '@triad/engine-sim';
import { post, type HttpAnswer } from './helpers';

export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

export type Part = Record<string, unknown>;

export const image = (url: string, extra: Part = {}): Part => ({ type: 'image_url', image_url: { url }, ...extra });
export const audio = (url: string): Part => ({ type: 'audio_url', audio_url: { url } });
export const video = (url: string): Part => ({ type: 'video_url', video_url: { url } });

/** The proxy's `content_uuid`: the part's own uuid, else sha256 of its URL. */
export function contentUuid(part: Part): string {
  if (typeof part['uuid'] === 'string') return part['uuid'];
  const kind = part['type'] as string;
  return sha256((part[kind] as { url: string }).url);
}

/** An encoder request for one group: the media parts alone, each with its uuid; no text, no max_tokens. */
export function encoderRequest(parts: readonly Part[], extra: Part = {}): Part {
  const content = parts.map((p) => ({ ...p, uuid: contentUuid(p) }));
  return { model: 'sim-model', messages: [{ role: 'user', content }], stream: false, ...extra };
}

/** One entry of an encoder's `ec_transfer_params`. */
export interface EcEntry {
  readonly metadata: Record<string, unknown>;
  readonly item_indices: number[];
  readonly peer_host?: string;
  readonly peer_port?: number;
  readonly size_bytes?: number;
}

const EMBEDS: Record<string, string> = {
  image_url: 'image_embeds',
  audio_url: 'audio_embeds',
  input_audio: 'audio_embeds',
  video_url: 'video_embeds',
};

/** The §1.7 rewrite of one part: a metadata-only reference with the metadata flattened one level, and the uuid. */
export function embedsRef(part: Part, entry: EcEntry): Part {
  const type = EMBEDS[part['type'] as string];
  const metadata = Object.fromEntries(Object.entries(entry.metadata).map(([k, v]) => [k, (v as unknown[]).flat(1)]));
  return { type, [type]: metadata, uuid: contentUuid(part) };
}

/** What the proxy sends a prefill (E→P→D) besides the rewritten body. */
export const PREFILL_KV = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

export const QUESTION = { type: 'text', text: 'What do these show?' };

/** POSTs a chat completion to a sim. */
export const chat = (sim: SimEngineHandle, body: unknown, headers: Record<string, string> = {}): Promise<HttpAnswer> =>
  post(`${sim.url}/v1/chat/completions`, body, headers);

/** One user message holding `content`. */
export const user = (...content: unknown[]): { role: string; content: unknown[] }[] => [{ role: 'user', content }];

/** vLLM's answer to a request that finished with an error, as the SSE event of a stream that was already open. */
export const ERROR_EVENT = '{"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}}';
