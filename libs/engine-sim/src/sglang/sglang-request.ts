import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { ParsedBody } from '../http/body';
import { EngineHttpError } from '../http/engine-error';
import { parseInferenceRequest, type InferenceRequest, type RequestKind } from '../openai/inference-request';
import { beamWidthOf } from './beam-search';

/**
 * A SGLang generation request split into the items SGLang schedules: one for a plain request, one per prompt for a
 * batch (`/generate` with a `text` list or an `input_ids` list of lists, `/v1/completions` with several prompts).
 * `n` is taken out before the items are validated, since parallel sampling is handled by the caller.
 */
export interface SglangRequest {
  readonly kind: RequestKind;
  readonly body: Record<string, unknown>;
  readonly items: readonly InferenceRequest[];
  /** The answer is a batch answer (`/generate` list, completion choices per prompt). */
  readonly batched: boolean;
  /** Samples per prompt (`n`, or `sampling_params.n` on `/generate`); 1 for a beam search, which is not expanded. */
  readonly n: number;
  /**
   * `/generate` beam search: `sampling_params.beam_width` above 1 (the first entry's with a list), with `returned`
   * the beams the answer carries (`sampling_params.n`); undefined for any other request.
   */
  readonly beams?: { readonly width: number; readonly returned: number };
  readonly stream: boolean;
  /** Request id per item (`rid`, a list for batches; else `X-Request-Id` for a plain request; else minted). */
  readonly rids: readonly string[];
}

function bad(message: string, param: string | null = null): EngineHttpError {
  return new EngineHttpError(400, message, 'BadRequestError', param);
}

function samplesOf(value: unknown, field: string): number {
  if (value === undefined || value === null) return 1;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw bad(`${field}: Input should be a valid integer`, 'n');
  if (value < 1) throw bad(`${field} must be at least 1, got ${value}.`, 'n');
  return value;
}

/**
 * `/generate`'s `sampling_params.n`: of the one object, or of a batch's per-prompt list, where every entry must ask
 * for the same count (GenerateReqInput's parallel_sample_num).
 */
function generateSamples(sp: unknown): number {
  const nOf = (p: unknown) => (p && typeof p === 'object' && !Array.isArray(p) ? (p as Record<string, unknown>)['n'] : undefined);
  if (!Array.isArray(sp)) return samplesOf(nOf(sp), 'n');
  const counts = sp.map((p) => samplesOf(nOf(p), 'n'));
  if (counts.some((c) => c !== counts[0])) throw bad('The parallel_sample_num should be the same for all samples in sample params.', 'n');
  return counts[0] ?? 1;
}

/** The batch prompts of a body, or undefined when it is a plain request. */
function batchPrompts(kind: RequestKind, body: Record<string, unknown>): { field: string; values: unknown[] } | undefined {
  if (kind === 'generate') {
    if (Array.isArray(body['text'])) return { field: 'text', values: body['text'] };
    const ids = body['input_ids'];
    if (Array.isArray(ids) && ids.length > 0 && Array.isArray(ids[0])) return { field: 'input_ids', values: ids };
    return undefined;
  }
  const prompt = body['prompt'];
  if (kind === 'completion' && Array.isArray(prompt) && prompt.length > 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) {
    return { field: 'prompt', values: prompt };
  }
  return undefined;
}

/** The body of batch item `i`: its prompt, and its entry of every per-item list field. */
function itemBody(body: Record<string, unknown>, field: string, value: unknown, i: number, size: number): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body, [field]: value };
  for (const name of ['sampling_params', 'image_data', 'rid']) {
    const v = body[name];
    if (Array.isArray(v) && (name !== 'image_data' || v.length === size)) out[name] = v[i];
  }
  return out;
}

function withoutSamples(kind: RequestKind, body: Record<string, unknown>): Record<string, unknown> {
  const { n: _n, ...rest } = body;
  if (kind !== 'generate') return rest;
  const sp = body['sampling_params'];
  const strip = (p: unknown) => {
    if (!p || typeof p !== 'object' || Array.isArray(p)) return p;
    const { n: _m, ...q } = p as Record<string, unknown>;
    return q;
  };
  return sp === undefined ? rest : { ...rest, sampling_params: Array.isArray(sp) ? sp.map(strip) : strip(sp) };
}

function ridsOf(body: Record<string, unknown>, headers: IncomingHttpHeaders, size: number, batched: boolean): string[] {
  const rid = body['rid'];
  const mint = () => randomUUID().replace(/-/g, '');
  if (batched) {
    if (rid === undefined || rid === null) return Array.from({ length: size }, mint);
    if (!Array.isArray(rid)) throw bad('The rid should be a list for batch processing.');
    if (rid.length !== size) throw bad(`The rid list has ${rid.length} entries but the batch has ${size}.`);
    return rid.map((r) => String(r));
  }
  if (typeof rid === 'string' && rid.length > 0) return [rid];
  const header = headers['x-request-id'];
  return [typeof header === 'string' && header.length > 0 ? header : mint()];
}

/** Validates a chat, completion or `/generate` body into its items; throws SGLang's 400 on a bad one. */
export function parseSglangRequest(kind: RequestKind, parsed: ParsedBody, headers: IncomingHttpHeaders): SglangRequest {
  if (!parsed.ok || !parsed.value || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) {
    // The shared parser words these errors as SGLang does.
    parseInferenceRequest(kind, parsed, 'sglang');
    throw bad('Input should be a valid dictionary or object to extract fields from');
  }
  const body = parsed.value as Record<string, unknown>;
  const samples = kind === 'generate' ? generateSamples(body['sampling_params']) : samplesOf(body['n'], 'n');
  const width = kind === 'generate' ? beamWidthOf(body['sampling_params']) : 1;
  // SGLang checks `n` against every entry first (above), then takes a beam search's `n` as its returned beams.
  const beams = width > 1 ? { width, returned: samples } : undefined;
  const n = beams ? 1 : samples;
  const single = withoutSamples(kind, body);
  const batch = batchPrompts(kind, single);
  if (batch && batch.values.length === 0) {
    throw bad(kind === 'generate' ? 'Either text, input_ids or input_embeds should be provided.' : 'Prompt cannot be empty', batch.field);
  }
  const bodies = batch ? batch.values.map((v, i) => itemBody(single, batch.field, v, i, batch.values.length)) : [single];
  const items = bodies.map((b) => parseInferenceRequest(kind, { ok: true, value: b }, 'sglang'));
  const batched = batch !== undefined;
  const rids = ridsOf(body, headers, items.length, batched);
  return { kind, body, items, batched, n, ...(beams ? { beams } : {}), stream: items[0]?.stream ?? false, rids };
}
