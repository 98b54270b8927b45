import type { OutgoingHttpHeaders } from 'node:http';
import { runGeneration, type GenerationControl, type GenerationEnv, type GenerationSpec, type TokenSink } from '../engine/generation';
import type { Exchange } from '../http/router';
import { sendJson, startEventStream } from '../http/respond';
import { DONE_EVENT, type ResponseFormat, type ResponseView } from '../openai/format';
import { ZERO_PROFILE_STREAM_BATCH } from '../openai/serve-generation';
import { sglangCompletionFormat, sglangGenerateFormat } from '../openai/sglang-format';

/** One prompt of a batch: what to compute and how its answer is labelled. */
export interface BatchItem {
  readonly spec: GenerationSpec;
  readonly view: ResponseView;
  /** Runs after the item's last token (a PD prefill registers its room). */
  readonly finish?: () => void;
  /** How the item's answer is written, when not as the route's usual one (a `/generate` beam search). */
  readonly format?: ResponseFormat;
}

export type BatchKind = 'generate' | 'completion';

/** Labels a run of SSE events with the item's index: `"index": i` on `/generate`, the choice index on completions. */
function tagEvents(kind: BatchKind, events: string, index: number): string {
  if (events.length === 0) return events;
  if (kind === 'completion') return events.replaceAll('"choices":[{"index":0,', `"choices":[{"index":${index},`);
  // Token texts are plain words and JSON strings escape newlines, so a blank line only ever ends an event.
  return events
    .slice(0, -2)
    .split('\n\n')
    .map((e) => `${e.slice(0, -1)},"index":${index}}\n\n`)
    .join('');
}

interface Usage {
  readonly prompt_tokens: number;
  readonly total_tokens: number;
  readonly completion_tokens: number;
  readonly prompt_tokens_details: null;
}

function summedUsage(items: readonly BatchItem[]): Usage {
  const prompt = items.reduce((n, i) => n + i.view.promptTokens, 0);
  const completion = items.reduce((n, i) => n + i.view.plan.count, 0);
  return { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion, prompt_tokens_details: null };
}

/** A completion batch as SGLang answers it: one choice per prompt (indexed), usage summed over the prompts. */
function completionBatchBody(items: readonly BatchItem[]): string {
  const parsed = items.map((i) => JSON.parse(sglangCompletionFormat.body(i.view, {})) as { choices: Record<string, unknown>[] });
  const choices = parsed.map((p, index) => ({ ...p.choices[0], index }));
  return JSON.stringify({ ...parsed[0], choices, usage: summedUsage(items) });
}

function closingEvents(kind: BatchKind, items: readonly BatchItem[]): string {
  const first = items[0]?.view;
  if (kind === 'generate' || !first?.includeUsage) return DONE_EVENT;
  const head = { id: first.id, object: 'text_completion', created: first.created, model: first.model };
  return `data: ${JSON.stringify({ ...head, choices: [], usage: summedUsage(items) })}\n\n${DONE_EVENT}`;
}

const NO_SINK: TokenSink = { batch: Number.MAX_SAFE_INTEGER, first() {}, write: () => true, drained: () => Promise.resolve() };

/**
 * Runs every prompt of a batch concurrently and answers as SGLang does: `/generate` returns a JSON list of the
 * per-prompt answers (streamed: each event carries `"index"`), completions return one choice per prompt (streamed:
 * chunks of all prompts interleaved, each with its choice index). Client aborts stop every prompt.
 */
export async function serveBatch(
  ex: Exchange,
  env: GenerationEnv,
  kind: BatchKind,
  items: readonly BatchItem[],
  stream: boolean,
  headers: OutgoingHttpHeaders,
): Promise<void> {
  const { res } = ex;
  const controls: GenerationControl[] = items.map(() => ({ aborted: res.destroyed }));
  res.once('close', () => {
    if (res.writableFinished) return;
    for (const c of controls) {
      c.aborted = true;
      c.cancelQueue?.();
    }
  });
  if (stream && !res.headersSent) startEventStream(res, headers);
  const format = kind === 'generate' ? sglangGenerateFormat : sglangCompletionFormat;
  const sinkOf = (item: BatchItem, index: number): TokenSink => {
    if (!stream) return NO_SINK;
    const framer = (item.format ?? format).framer(item.view);
    let opening = '';
    let written = 0;
    return {
      batch: ZERO_PROFILE_STREAM_BATCH,
      first: () => {
        opening = framer.open();
      },
      write: (from, to) => {
        if (res.destroyed) return true;
        const text = tagEvents(kind, opening + framer.tokens(from, to), index);
        opening = '';
        written = to;
        return res.write(text);
      },
      drained: () => env.stalls.drained(res, written),
    };
  };
  await Promise.all(items.map((item, i) => runGeneration(item.spec, sinkOf(item, i), controls[i], env)));
  if (controls.some((c) => c.aborted) || res.destroyed) {
    env.onAbort?.();
    return;
  }
  for (const item of items) item.finish?.();
  if (stream) res.end(closingEvents(kind, items));
  else if (kind === 'generate') {
    const bodies = items.map((i) => (i.format ?? sglangGenerateFormat).body(i.view, {}));
    sendJson(res, 200, `[${bodies.join(',')}]`, headers);
  } else sendJson(res, 200, completionBatchBody(items), headers);
}
