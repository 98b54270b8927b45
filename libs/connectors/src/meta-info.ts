import type { Usage } from '@triad/request';
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
const META_INFO_NEEDLE = Buffer.from('"meta_info":');
const INDEX_NEEDLE = Buffer.from('"index":');
const PROMPT_KEY = Buffer.from('prompt_tokens');
const COMPLETION_KEY = Buffer.from('completion_tokens');

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
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

function skipSpaces(bytes: Buffer, at: number): number {
  let i = at;
  for (let c = bytes[i]; c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = bytes[++i]);
  return i;
}

/** Index of the quote that closes the string whose text starts at `from` (-1 when it does not close). */
function stringEnd(bytes: Buffer, from: number): number {
  let at = bytes.indexOf(QUOTE, from);
  while (at >= 0) {
    let slashes = 0;
    while (bytes[at - 1 - slashes] === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return at;
    at = bytes.indexOf(QUOTE, at + 1);
  }
  return -1;
}

/** The integer after `key":` (spaces allowed around the colon) at `at`, or -1 when the key has no integer value. */
function integerAfterKey(bytes: Buffer, at: number): number {
  let i = skipSpaces(bytes, at);
  if (bytes[i] !== COLON) return -1;
  i = skipSpaces(bytes, i + 1);
  let n = -1;
  for (let c = bytes[i]; c !== undefined && c >= 0x30 && c <= 0x39; c = bytes[++i]) n = (n < 0 ? 0 : n * 10) + (c - 0x30);
  return n;
}

/**
 * The counts of the `meta_info` object whose value starts at `from` (just past the needle): its own top-level
 * `prompt_tokens` and `completion_tokens` (-1 when absent). Strings are skipped whole, so a brace or a key name
 * inside one (a stop string, a logprob's token text) changes nothing.
 */
function readMetaInfo(bytes: Buffer, from: number): MetaInfoCounts | undefined {
  let i = skipSpaces(bytes, from);
  if (bytes[i] !== OPEN_BRACE) return undefined;
  let depth = 0;
  let prompt = -1;
  let completion = -1;
  for (; i < bytes.length; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      const start = i + 1;
      const end = stringEnd(bytes, start);
      if (end < 0) return undefined;
      i = end;
      if (depth !== 1) continue;
      const length = end - start;
      if (length === PROMPT_KEY.length && bytes.compare(PROMPT_KEY, 0, length, start, end) === 0) {
        const n = integerAfterKey(bytes, end + 1);
        if (n >= 0) prompt = n;
      } else if (length === COMPLETION_KEY.length && bytes.compare(COMPLETION_KEY, 0, length, start, end) === 0) {
        const n = integerAfterKey(bytes, end + 1);
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
 * Usage of a whole SGLang native answer: the counts of its `meta_info`, summed over the items of a batch (a JSON
 * list of answers); undefined when no `meta_info` holds a count.
 */
export function parseMetaInfoUsage(body: Buffer): Usage | undefined {
  let prompt = 0;
  let completion = 0;
  let found = false;
  for (let at = body.indexOf(META_INFO_NEEDLE); at >= 0;) {
    const counts = readMetaInfo(body, at + META_INFO_NEEDLE.length);
    if (counts === undefined) break;
    if (counted(counts)) {
      found = true;
      prompt += Math.max(0, counts.prompt);
      completion += Math.max(0, counts.completion);
    }
    at = body.indexOf(META_INFO_NEEDLE, counts.end);
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
      const at = event.indexOf(META_INFO_NEEDLE);
      if (at < 0) continue;
      const counts = readMetaInfo(event, at + META_INFO_NEEDLE.length);
      if (counts === undefined || !counted(counts)) continue;
      const index = itemIndex(event, counts.end);
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
function itemIndex(event: Buffer, from: number): number {
  const at = event.indexOf(INDEX_NEEDLE, from);
  const n = at < 0 ? -1 : integerAfterKey(event, at + INDEX_NEEDLE.length - 1);
  return n >= 0 ? n : 0;
}
