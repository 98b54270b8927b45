import { BadRequestError } from '../errors/request-errors';
import { countContentParts } from './media';

/**
 * Bounds a request is checked against before any work starts (before parsing, routing, scheduling or a leg),
 * so no body can make the gateway recurse, fan out or echo without end. Each has a gateway setting of the
 * same name in kebab case (`--max-json-depth`, `TRIAD_MAX_JSON_DEPTH`); docs/configuration.md lists them.
 */
export interface RequestLimits {
  /** Deepest nesting of JSON arrays and objects in the body (the body object itself is level 1). */
  readonly maxJsonDepth: number;
  /** Media parts (image_url, audio_url, input_audio, video_url) across all messages of a chat request. */
  readonly maxMediaItems: number;
  /** Content parts of any kind across all messages of a chat request. */
  readonly maxContentParts: number;
  /** Length of the `model` string, in characters. */
  readonly maxModelChars: number;
}

export const DEFAULT_REQUEST_LIMITS: RequestLimits = Object.freeze({
  maxJsonDepth: 64,
  maxMediaItems: 64,
  maxContentParts: 1024,
  maxModelChars: 256,
});

/** The setting names, as the 400 answer names them. */
const SETTING: Readonly<Record<keyof RequestLimits, string>> = {
  maxJsonDepth: 'max-json-depth',
  maxMediaItems: 'max-media-items',
  maxContentParts: 'max-content-parts',
  maxModelChars: 'max-model-chars',
};

/** 400: the request is over one of the gateway's {@link RequestLimits}; the message names the limit and its setting. */
export class RequestLimitError extends BadRequestError {
  readonly limit: keyof RequestLimits;
  readonly max: number;

  constructor(limit: keyof RequestLimits, max: number, what: string, param: string | null) {
    super(`${what}; the gateway accepts at most ${max} (limit ${SETTING[limit]})`, param);
    this.limit = limit;
    this.max = max;
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * Whether the JSON text nests arrays/objects deeper than `max`, found by scanning the bytes (no recursion, no
 * parse): strings are skipped with `indexOf` (native), so a large base64 image costs a memchr, not a JS loop.
 * Malformed text is not judged here (JSON.parse does that); the scan only has to be right for valid JSON.
 */
export function jsonNestsDeeperThan(raw: Buffer, max: number): boolean {
  let depth = 0;
  const n = raw.length;
  for (let i = 0; i < n; i++) {
    const c = raw[i];
    if (c === QUOTE) {
      // Jump to the closing quote: one not preceded by an odd run of backslashes.
      let j = i;
      for (;;) {
        j = raw.indexOf(QUOTE, j + 1);
        if (j < 0) return false;
        let k = j - 1;
        while (raw[k] === BACKSLASH) k--;
        if ((j - 1 - k) % 2 === 0) break;
      }
      i = j;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/** Refuses raw JSON that nests deeper than the limit (before it is parsed: later code may recurse over it). */
export function checkRawLimits(raw: Buffer, limits: RequestLimits): void {
  if (jsonNestsDeeperThan(raw, limits.maxJsonDepth)) {
    throw new RequestLimitError('maxJsonDepth', limits.maxJsonDepth, 'request body nests JSON arrays/objects too deeply', null);
  }
}

/** Refuses a parsed body over the string and part-count limits (cheap: walks messages and their content arrays). */
export function checkBodyLimits(body: Readonly<Record<string, unknown>>, limits: RequestLimits): void {
  const model = body['model'];
  if (typeof model === 'string' && model.length > limits.maxModelChars) {
    throw new RequestLimitError('maxModelChars', limits.maxModelChars, `'model' is ${model.length} characters long`, 'model');
  }
  const { parts, media } = countContentParts(body);
  if (parts > limits.maxContentParts) {
    throw new RequestLimitError('maxContentParts', limits.maxContentParts, `the messages hold ${parts} content parts`, 'messages');
  }
  if (media > limits.maxMediaItems) {
    throw new RequestLimitError('maxMediaItems', limits.maxMediaItems, `the messages hold ${media} media items`, 'messages');
  }
}
