import type { Usage } from '@triad/request';

const USAGE_KEY = '"usage":';
const USAGE_NEEDLE = Buffer.from(USAGE_KEY);
const EMPTY_CHOICES = Buffer.from('"choices":[]');
const EVENT_END = Buffer.from('\n\n');

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
 * an occurrence inside generated text is escaped as `\"usage\"` and skipped).
 */
export function parseBodyUsage(body: Buffer): Usage | undefined {
  // latin1 keeps byte offsets; JSON structure is ASCII and UTF-8 continuation bytes never look like it.
  const text = body.toString('latin1');
  let at = text.lastIndexOf(USAGE_KEY);
  while (at > 0 && text.charCodeAt(at - 1) === 0x5c) at = text.lastIndexOf(USAGE_KEY, at - 1);
  return at < 0 ? undefined : readUsageObject(text, at + USAGE_KEY.length);
}

/**
 * Relays an SSE byte stream unchanged except for one thing: when `suppress` is set, the usage-only event
 * (`"choices":[]` with a `usage` object) that the gateway injected is removed. Token counts are read from any
 * usage event. Chunks that end on an event boundary pass through as the same Buffer; a partial trailing event is
 * held until its end arrives, so an event is never split when it has to be inspected.
 */
export class SseUsageRelay {
  usage: Usage | undefined;
  readonly #suppress: boolean;
  #pending: Buffer | undefined;

  constructor(suppress: boolean) {
    this.#suppress = suppress;
  }

  /** Bytes to write to the client for this chunk (possibly empty). */
  push(chunk: Buffer): Buffer {
    let data = chunk;
    if (this.#pending !== undefined) {
      data = Buffer.concat([this.#pending, chunk]);
      this.#pending = undefined;
    }
    const last = data.lastIndexOf(EVENT_END);
    if (last < 0) {
      this.#pending = chunk === data ? Buffer.from(data) : data;
      return EMPTY;
    }
    const cut = last + 2;
    if (cut < data.length) this.#pending = Buffer.from(data.subarray(cut));
    const complete = cut < data.length ? data.subarray(0, cut) : data;
    return complete.indexOf(USAGE_NEEDLE) < 0 ? complete : this.#inspect(complete);
  }

  /** Whatever is still held at the end of the stream (an unterminated last event), written as is. */
  flush(): Buffer {
    const rest = this.#pending ?? EMPTY;
    this.#pending = undefined;
    if (rest.length > 0 && rest.indexOf(USAGE_NEEDLE) >= 0) return this.#inspect(rest);
    return rest;
  }

  #inspect(events: Buffer): Buffer {
    let from = 0;
    let out: Buffer[] | undefined;
    let copiedTo = 0;
    for (;;) {
      const at = events.indexOf(USAGE_NEEDLE, from);
      if (at < 0) break;
      const start = eventStart(events, at);
      const endIdx = events.indexOf(EVENT_END, at);
      const end = endIdx < 0 ? events.length : endIdx + 2;
      const event = events.subarray(start, end);
      const usage = readUsageObject(event.toString('latin1'), at - start + USAGE_KEY.length);
      if (usage !== undefined) {
        this.usage = usage;
        if (this.#suppress && event.indexOf(EMPTY_CHOICES) >= 0) {
          out ??= [];
          out.push(events.subarray(copiedTo, start));
          copiedTo = end;
        }
      }
      from = end;
    }
    if (out === undefined) return events;
    out.push(events.subarray(copiedTo));
    return Buffer.concat(out);
  }
}

function eventStart(events: Buffer, at: number): number {
  const prev = events.lastIndexOf(EVENT_END, at);
  return prev < 0 ? 0 : prev + 2;
}

const EMPTY = Buffer.alloc(0);
