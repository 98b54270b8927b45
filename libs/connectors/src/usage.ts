import type { Usage } from '@triad/request';
import { MetaInfoTally, parseMetaInfoUsage } from './meta-info';
import { SseEventSplitter, splitSseEvents } from './sse';

const USAGE_KEY = '"usage":';
const USAGE_NEEDLE = Buffer.from(USAGE_KEY);
const EMPTY_CHOICES = Buffer.from('"choices":[]');

function readUsageObject(text: string, start: number): Usage | undefined {
  let i = start;
  while (text.charCodeAt(i) === 0x20) i++;
  if (text.charCodeAt(i) !== 0x7b) return undefined;
  let depth = 0;
  let j = i;
  for (; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth === 0) break;
  }
  // Only numbers are read, so a regex over the object's span is enough (details objects hold other keys). The
  // Responses API (and Anthropic's Messages) name them input and output tokens.
  const span = text.slice(i, j + 1);
  const prompt = /"prompt_tokens"\s*:\s*(\d+)/.exec(span) ?? /"input_tokens"\s*:\s*(\d+)/.exec(span);
  const completion = /"completion_tokens"\s*:\s*(\d+)/.exec(span) ?? /"output_tokens"\s*:\s*(\d+)/.exec(span);
  if (!prompt && !completion) return undefined;
  return { promptTokens: prompt ? Number(prompt[1]) : 0, completionTokens: completion ? Number(completion[1]) : 0 };
}

/**
 * Usage of a non-stream answer: the last top-level-looking `"usage":{...}` (engines put it after the choices;
 * an occurrence inside generated text is escaped as `\"usage\"` and skipped). An answer without one (SGLang's
 * native `/generate`) is counted from its `meta_info`, summed over a batch's items.
 */
export function parseBodyUsage(body: Buffer): Usage | undefined {
  // latin1 keeps byte offsets; JSON structure is ASCII and UTF-8 continuation bytes never look like it.
  const text = body.toString('latin1');
  let at = text.lastIndexOf(USAGE_KEY);
  while (at > 0 && text.charCodeAt(at - 1) === 0x5c) at = text.lastIndexOf(USAGE_KEY, at - 1);
  return (at < 0 ? undefined : readUsageObject(text, at + USAGE_KEY.length)) ?? parseMetaInfoUsage(text);
}

/**
 * Relays an SSE byte stream unchanged except for one thing: when `suppress` is set, the usage-only event
 * (`"choices":[]` with a `usage` object) that the gateway injected is removed. Token counts are read from any
 * usage event; with `readMetaInfo` (SGLang's native `/generate`, whose events carry no usage) from the events'
 * `meta_info` when no usage event came. Chunks that end on an event boundary pass through as the same Buffer; a
 * partial trailing event is held until its end arrives, so an event is never split when it has to be inspected.
 */
export class SseUsageRelay {
  #usage: Usage | undefined;
  readonly #suppress: boolean;
  readonly #splitter = new SseEventSplitter();
  /** Only for `/generate` streams: OpenAI streams pay no second search per chunk. */
  readonly #metaInfo: MetaInfoTally | undefined;

  constructor(suppress: boolean, readMetaInfo = false) {
    this.#suppress = suppress;
    this.#metaInfo = readMetaInfo ? new MetaInfoTally() : undefined;
  }

  /** Token counts the stream reported: its usage events', else its `meta_info` totals. */
  get usage(): Usage | undefined {
    return this.#usage ?? this.#metaInfo?.usage;
  }

  /** Bytes to write to the client for this chunk (possibly empty). */
  push(chunk: Buffer): Buffer {
    const complete = this.#splitter.push(chunk);
    if (this.#metaInfo !== undefined) this.#metaInfo.read(complete);
    return complete.indexOf(USAGE_NEEDLE) < 0 ? complete : this.#inspect(complete);
  }

  /** Whatever is still held at the end of the stream (an unterminated last event), written as is. */
  flush(): Buffer {
    const rest = this.#splitter.end();
    if (this.#metaInfo !== undefined) this.#metaInfo.read(rest);
    return rest.indexOf(USAGE_NEEDLE) < 0 ? rest : this.#inspect(rest);
  }

  #inspect(events: Buffer): Buffer {
    let kept: Buffer[] | undefined;
    const all = splitSseEvents(events);
    for (const [i, event] of all.entries()) {
      const at = event.indexOf(USAGE_NEEDLE);
      const usage = at < 0 ? undefined : readUsageObject(event.toString('latin1'), at + USAGE_KEY.length);
      if (usage !== undefined) this.#usage = usage;
      const drop = usage !== undefined && this.#suppress && event.indexOf(EMPTY_CHOICES) >= 0;
      if (drop) kept ??= all.slice(0, i);
      else kept?.push(event);
    }
    return kept === undefined ? events : Buffer.concat(kept);
  }
}
