import type { Usage } from '@triad/request';
import { skipString } from './json-text';
import { splitSseEvents } from './sse';

/**
 * Token counts of SGLang's native `/generate` answers, which carry no OpenAI `usage`: each answer object (one per
 * prompt of a batch) has a `meta_info` object with `prompt_tokens` and `completion_tokens` among other keys (the id,
 * a `finish_reason` object, logprob lists with token texts, …). Streamed, every event repeats `meta_info` with the
 * counts so far, and a batch's events carry `"index"` (added after `meta_info`).
 *
 * The needle ends in `":`: a JSON string holds a quote only escaped (`\"`), so generated text that mentions
 * `"meta_info":` never matches it.
 */
const META_INFO_KEY = '"meta_info":';
const META_INFO_NEEDLE = Buffer.from(META_INFO_KEY);
const INDEX_KEY = '"index":';
const PROMPT_KEY = 'prompt_tokens';
const COMPLETION_KEY = 'completion_tokens';

const COLON = 0x3a;
const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

interface MetaInfoCounts {
  readonly prompt: number;
  readonly completion: number;
  /** Index just past the object's closing brace. */
  readonly end: number;
}

function skipSpaces(text: string, at: number): number {
  let i = at;
  for (let c = text.charCodeAt(i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = text.charCodeAt(++i));
  return i;
}

/** The integer after `key":` (spaces allowed around the colon) at `at`, or -1 when the key has no integer value. */
function integerAfterKey(text: string, at: number): number {
  let i = skipSpaces(text, at);
  if (text.charCodeAt(i) !== COLON) return -1;
  i = skipSpaces(text, i + 1);
  let n = -1;
  for (let c = text.charCodeAt(i); c >= 0x30 && c <= 0x39; c = text.charCodeAt(++i)) n = (n < 0 ? 0 : n * 10) + (c - 0x30);
  return n;
}

/**
 * The counts of the `meta_info` object whose value starts at `from` (just past the needle): its own top-level
 * `prompt_tokens` and `completion_tokens` (-1 when absent). Strings are skipped whole, so a brace or a key name
 * inside one (a stop string, a logprob's token text) changes nothing.
 */
function readMetaInfo(text: string, from: number): MetaInfoCounts | undefined {
  let i = skipSpaces(text, from);
  if (text.charCodeAt(i) !== OPEN_BRACE) return undefined;
  let depth = 0;
  let prompt = -1;
  let completion = -1;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i + 1;
      // The closing quote; a string left open runs to the end, and so the object is not closed either.
      const end = skipString(text, i) - 1;
      i = end;
      if (depth !== 1) continue;
      const length = end - start;
      if (length === PROMPT_KEY.length && text.startsWith(PROMPT_KEY, start)) {
        const n = integerAfterKey(text, end + 1);
        if (n >= 0) prompt = n;
      } else if (length === COMPLETION_KEY.length && text.startsWith(COMPLETION_KEY, start)) {
        const n = integerAfterKey(text, end + 1);
        if (n >= 0) completion = n;
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
    else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) return { prompt, completion, end: i + 1 };
  }
  return undefined;
}

function counted(counts: MetaInfoCounts): boolean {
  return counts.prompt >= 0 || counts.completion >= 0;
}

/**
 * Usage of a whole SGLang native answer, as latin1 text (byte offsets kept): the counts of its `meta_info`, summed
 * over the items of a batch (a JSON list of answers); undefined when no `meta_info` holds a count.
 */
export function parseMetaInfoUsage(text: string): Usage | undefined {
  let prompt = 0;
  let completion = 0;
  let found = false;
  for (let at = text.indexOf(META_INFO_KEY); at >= 0;) {
    const counts = readMetaInfo(text, at + META_INFO_KEY.length);
    if (counts === undefined) break;
    if (counted(counts)) {
      found = true;
      prompt += Math.max(0, counts.prompt);
      completion += Math.max(0, counts.completion);
    }
    at = text.indexOf(META_INFO_KEY, counts.end);
  }
  return found ? { promptTokens: prompt, completionTokens: completion } : undefined;
}

/**
 * The counts of a streamed SGLang native answer: each event's `meta_info` holds the item's counts so far, so the
 * last event of each item (by its `"index"`, 0 without one) holds its totals; the usage is their sum.
 */
export class MetaInfoTally {
  readonly #items = new Map<number, Usage>();

  /** Reads the events in `events` (whole events: the relay cuts the stream at event ends). */
  read(events: Buffer): void {
    if (events.indexOf(META_INFO_NEEDLE) < 0) return;
    for (const event of splitSseEvents(events)) {
      if (event.indexOf(META_INFO_NEEDLE) < 0) continue;
      const text = event.toString('latin1');
      const counts = readMetaInfo(text, text.indexOf(META_INFO_KEY) + META_INFO_KEY.length);
      if (counts === undefined || !counted(counts)) continue;
      const index = itemIndex(text, counts.end);
      const before = this.#items.get(index);
      this.#items.set(index, {
        promptTokens: counts.prompt >= 0 ? counts.prompt : (before?.promptTokens ?? 0),
        completionTokens: counts.completion >= 0 ? counts.completion : (before?.completionTokens ?? 0),
      });
    }
  }

  get usage(): Usage | undefined {
    if (this.#items.size === 0) return undefined;
    let prompt = 0;
    let completion = 0;
    for (const item of this.#items.values()) {
      prompt += item.promptTokens;
      completion += item.completionTokens;
    }
    return { promptTokens: prompt, completionTokens: completion };
  }
}

/** A batch event's `"index"` (SGLang adds it after `meta_info`, so only the rest of the event is searched), else 0. */
function itemIndex(event: string, from: number): number {
  const at = event.indexOf(INDEX_KEY, from);
  const n = at < 0 ? -1 : integerAfterKey(event, at + INDEX_KEY.length - 1);
  return n >= 0 ? n : 0;
}
