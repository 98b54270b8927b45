import type { Usage } from '@triad/request';
import { SseEventSplitter, sseEvents } from './sse';
import { abortOf } from './leading-event';

/*
 * `n > 1` as single-sample requests merged into one answer (SGLang PD: upstream sends every sample of a request on
 * one bootstrap room, so the gateway sends n requests with a room each; docs/protocols/sglang.md). Item `i` of
 * sample `j` becomes item `i * n + j` of the merged answer: the order OpenAI gives a completions prompt list's
 * choices and SGLang gives a `/generate` batch's samples (prompt-major), so a single prompt's samples are 0..n-1.
 */

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** One sample's request: the same body asking for one sample (`n`, `sampling_params.n`, or each per-prompt entry's). */
export function singleSampleBody(body: Json): Json {
  if (typeof body['n'] === 'number') return { ...body, n: 1 };
  const sp = body['sampling_params'];
  if (isObject(sp)) return typeof sp['n'] === 'number' ? { ...body, sampling_params: { ...sp, n: 1 } } : body;
  if (!Array.isArray(sp)) return body;
  return { ...body, sampling_params: sp.map((p: unknown) => (isObject(p) && typeof p['n'] === 'number' ? { ...p, n: 1 } : p)) };
}

function mergedIndex(index: unknown, sample: number, n: number): number {
  return (typeof index === 'number' ? index : 0) * n + sample;
}

function count(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}

/**
 * The usage of n single-sample answers as one: the prompt counted once (every sample read the same prompt, as an
 * engine sampling in parallel counts it), completions summed. Undefined when a sample reported none.
 */
function mergedUsage(usages: readonly unknown[]): Json | undefined {
  if (usages.length === 0 || !usages.every(isObject)) return undefined;
  const all = usages as Json[];
  const first = all[0];
  const prompt = count(first['prompt_tokens']);
  const completion = all.reduce((sum, u) => sum + count(u['completion_tokens']), 0);
  const merged: Json = { ...first, prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  const details = all.map((u) => u['completion_tokens_details']);
  if (details.every(isObject)) {
    const sum: Json = {};
    for (const d of details) for (const [k, v] of Object.entries(d)) if (typeof v === 'number') sum[k] = count(sum[k]) + v;
    merged['completion_tokens_details'] = { ...details[0], ...sum };
  }
  return merged;
}

function byIndex(a: Json, b: Json): number {
  return count(a['index']) - count(b['index']);
}

/** Usage as the gateway counts it, from an OpenAI usage object. */
function countedUsage(usage: Json | undefined): Usage | undefined {
  return usage === undefined
    ? undefined
    : { promptTokens: count(usage['prompt_tokens']), completionTokens: count(usage['completion_tokens']) };
}

/** A merged answer and its token counts (each prompt once, every sample's completion). */
export interface MergedAnswer {
  readonly body: Buffer;
  readonly usage: Usage | undefined;
}

/**
 * The n answers (in sample order) of a non-streamed request as the one answer the client asked for: OpenAI
 * choices re-indexed under the first answer's `id`, usage merged; `/generate` answers (an object per prompt, a list
 * for a batch) as SGLang's list of samples, counted from their `meta_info`.
 */
export function mergeSampleAnswers(bodies: readonly Buffer[]): MergedAnswer {
  const n = bodies.length;
  const answers = bodies.map((b) => JSON.parse(b.toString('utf8')) as unknown);
  const first = answers[0];
  if (isObject(first) && Array.isArray(first['choices'])) {
    const choices: Json[] = [];
    answers.forEach((a, j) => {
      for (const c of (a as Json)['choices'] as Json[]) choices.push({ ...c, index: mergedIndex(c['index'], j, n) });
    });
    const merged: Json = { ...first, choices: choices.sort(byIndex) };
    const usage = mergedUsage(answers.map((a) => (a as Json)['usage']));
    if (usage !== undefined) merged['usage'] = usage;
    return { body: Buffer.from(JSON.stringify(merged)), usage: countedUsage(usage) };
  }
  // `/generate`: SGLang answers n > 1 with a list, one entry per (prompt, sample), prompt-major.
  const items = answers.map((a) => (Array.isArray(a) ? a : [a]));
  const merged: unknown[] = [];
  let promptTokens = 0;
  let completionTokens = 0;
  for (let i = 0; i < items[0].length; i++) {
    for (let j = 0; j < n; j++) {
      const item = items[j][i] as unknown;
      merged.push(item);
      const meta = isObject(item) ? item['meta_info'] : undefined;
      if (!isObject(meta)) continue;
      if (j === 0) promptTokens += count(meta['prompt_tokens']);
      completionTokens += count(meta['completion_tokens']);
    }
  }
  return { body: Buffer.from(JSON.stringify(merged)), usage: { promptTokens, completionTokens } };
}

/** A sample's stream carried an error event (or, on `/generate`, an aborted output): the whole request fails with it. */
export class SampleStreamError extends Error {
  /** The HTTP status the engine named in the event (`code`), else 500. */
  readonly status: number;

  constructor(message: string, status: number) {
    super(message);
    this.name = 'SampleStreamError';
    this.status = status;
  }
}

function errorOf(event: Json): SampleStreamError {
  const err = event['error'];
  const message = isObject(err) && typeof err['message'] === 'string' ? err['message'] : JSON.stringify(err);
  const code = isObject(err) ? err['code'] : undefined;
  const status = typeof code === 'number' && Number.isInteger(code) && code >= 400 && code < 600 ? code : 500;
  return new SampleStreamError(message, status);
}

const DONE = Buffer.from('data: [DONE]\n\n');

/**
 * Merges the event streams of n single-sample requests into one, event by event as they arrive: OpenAI chunks get
 * their choices re-indexed and one `id` (the first chunk's); `/generate` events get the `index` SGLang gives a
 * parallel sample. Each sample's `[DONE]` and usage chunk are held back: the merged stream ends with one usage chunk
 * (the prompt counted once, completions summed; only when the client asked for it) and one `[DONE]`.
 */
export class SampleStreamMerger {
  readonly #n: number;
  readonly #clientWantsUsage: boolean;
  readonly #splitters: SseEventSplitter[] = [];
  /** Each sample's usage chunk (OpenAI). */
  readonly #usages: unknown[];
  /** `/generate`: the last `meta_info` counts per merged index, and whether the index is its prompt's sample 0. */
  readonly #metaInfo = new Map<number, { prompt: number; completion: number; counted: boolean }>();
  /** The first OpenAI chunk's `id`, `object`, `created`, `model`: every merged chunk carries them. */
  #head: Json | undefined;

  constructor(n: number, clientWantsUsage: boolean) {
    this.#n = n;
    this.#clientWantsUsage = clientWantsUsage;
    this.#usages = new Array<unknown>(n).fill(undefined);
    for (let j = 0; j < n; j++) this.#splitters.push(new SseEventSplitter());
  }

  /** The merged events that `chunk` of sample `sample` completes (possibly none); throws a SampleStreamError. */
  push(sample: number, chunk: Buffer): Buffer {
    const bytes = this.#splitters[sample].push(chunk);
    if (bytes.length === 0) return bytes;
    let out = '';
    for (const e of sseEvents(bytes)) {
      const data = e.data.trim();
      if (data === '' || data === '[DONE]') continue;
      const event = JSON.parse(data) as unknown;
      if (!isObject(event)) continue;
      if (event['error'] !== undefined) throw errorOf(event);
      // SGLang's `/generate` reports a scheduler abort as the aborted output, not as an error event.
      const aborted = abortOf(event);
      if (aborted !== undefined) throw new SampleStreamError(aborted.message, aborted.status);
      const rewritten = Array.isArray(event['choices']) ? this.#chunk(sample, event) : this.#generateEvent(sample, event);
      if (rewritten !== undefined) out += `data: ${JSON.stringify(rewritten)}\n\n`;
    }
    return Buffer.from(out);
  }

  #chunk(sample: number, event: Json): Json | undefined {
    const usage = event['usage'];
    if (isObject(usage)) this.#usages[sample] = usage;
    const choices = event['choices'] as Json[];
    if (choices.length === 0) return undefined; // the sample's usage chunk: merged at the end
    this.#head ??= { id: event['id'], object: event['object'], created: event['created'], model: event['model'] };
    const n = this.#n;
    const { usage: _usage, ...rest } = event;
    return { ...rest, id: this.#head['id'], choices: choices.map((c) => ({ ...c, index: mergedIndex(c['index'], sample, n) })) };
  }

  #generateEvent(sample: number, event: Json): Json {
    const index = mergedIndex(event['index'], sample, this.#n);
    const meta = event['meta_info'];
    if (isObject(meta)) {
      this.#metaInfo.set(index, {
        prompt: count(meta['prompt_tokens']),
        completion: count(meta['completion_tokens']),
        counted: sample === 0,
      });
    }
    return { ...event, index };
  }

  /** Token counts of the merged stream: usage chunks', else `/generate`'s `meta_info` (each prompt once). */
  get usage(): Usage | undefined {
    const usage = countedUsage(mergedUsage(this.#usages));
    if (usage !== undefined) return usage;
    if (this.#metaInfo.size === 0) return undefined;
    let promptTokens = 0;
    let completionTokens = 0;
    for (const m of this.#metaInfo.values()) {
      if (m.counted) promptTokens += m.prompt;
      completionTokens += m.completion;
    }
    return { promptTokens, completionTokens };
  }

  /** The end of the merged stream, once every sample's ended: the usage chunk when the client asked for one, `[DONE]`. */
  end(): Buffer {
    const usage = this.#clientWantsUsage && this.#head !== undefined ? mergedUsage(this.#usages) : undefined;
    if (usage === undefined) return DONE;
    return Buffer.concat([Buffer.from(`data: ${JSON.stringify({ ...this.#head, choices: [], usage })}\n\n`), DONE]);
  }
}
