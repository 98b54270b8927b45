import { randomFillSync } from 'node:crypto';

/**
 * Small operations on JSON text, so values the gateway only relays (a prefill's `kv_transfer_params`, SGLang's
 * 63-bit `bootstrap_room`) keep their exact bytes instead of passing through JS numbers.
 */

/**
 * JSON text of a body's top-level object and array values, shared by the legs built from one body (a vLLM
 * prefill and its decode): the messages are serialized once per request, not once per leg. Only for a body that
 * is not changed between the legs.
 */
export type JsonFragments = Map<string, string | undefined>;

/**
 * Serializes `body` with some top-level keys dropped or replaced and optional raw JSON fields appended
 * (`rawFields` is `"k":v,...` text written as is). `body` is not mutated. With `fragments`, the text of each
 * object or array value is taken from there (and put there once made); the output is the same either way.
 */
export function serializeWith(
  body: Record<string, unknown>,
  set: Record<string, unknown> | undefined,
  drop: readonly string[] | undefined,
  rawFields?: string,
  fragments?: JsonFragments,
): string {
  if (fragments !== undefined) return spliceWith(body, set, drop, rawFields, fragments);
  const copy: Record<string, unknown> = {};
  for (const key in body) {
    if (drop !== undefined && drop.includes(key)) continue;
    if (set !== undefined && key in set) continue;
    copy[key] = body[key];
  }
  if (set !== undefined) {
    for (const key in set) if (set[key] !== undefined) copy[key] = set[key];
  }
  const json = JSON.stringify(copy);
  if (rawFields === undefined || rawFields === '') return json;
  return json.length === 2 ? `{${rawFields}}` : `${json.slice(0, -1)},${rawFields}}`;
}

/** `serializeWith` from per-key text: the same output as `JSON.stringify` of the copy (key order, skipped undefined). */
function spliceWith(
  body: Record<string, unknown>,
  set: Record<string, unknown> | undefined,
  drop: readonly string[] | undefined,
  rawFields: string | undefined,
  fragments: JsonFragments,
): string {
  let out = '';
  for (const key in body) {
    if (drop !== undefined && drop.includes(key)) continue;
    if (set !== undefined && key in set) continue;
    const value = body[key];
    let text: string | undefined;
    if (value !== null && typeof value === 'object') {
      text = fragments.get(key);
      if (text === undefined) {
        text = JSON.stringify(value);
        fragments.set(key, text);
      }
    } else {
      text = scalarJson(value);
    }
    if (text !== undefined) out += `${out === '' ? '' : ','}${memberName(key)}${text}`;
  }
  if (set !== undefined) {
    for (const key in set) {
      const value = set[key];
      const text = value === undefined ? undefined : valueJson(value);
      if (text !== undefined) out += `${out === '' ? '' : ','}${memberName(key)}${text}`;
    }
  }
  if (rawFields !== undefined && rawFields !== '') out += `${out === '' ? '' : ','}${rawFields}`;
  return `{${out}}`;
}

/** Keys kept with their member-name text; bodies use a few dozen, and a client cannot grow the cache past this. */
const MEMBER_NAMES_KEPT = 512;
const memberNames = new Map<string, string>();

/**
 * `"key":` as `JSON.stringify` writes a member name, from a cache: the legs' bodies repeat the same keys on every
 * request, and each `JSON.stringify` call costs several hundred instructions before it writes a byte.
 */
function memberName(key: string): string {
  let text = memberNames.get(key);
  if (text === undefined) {
    text = `${JSON.stringify(key)}:`;
    if (memberNames.size < MEMBER_NAMES_KEPT) memberNames.set(key, text);
  }
  return text;
}

/** A string `JSON.stringify` writes as it is: no control character, quote, backslash or surrogate. */
// eslint-disable-next-line no-control-regex -- finding control characters is this pattern's job
const PLAIN_STRING = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;
/** From this length a string is checked by PLAIN_STRING rather than a loop. */
const PLAIN_FROM = 16;

/**
 * `JSON.stringify` of a value that is not an object, without the call where the text is plain: a string with
 * nothing to escape (no control character, quote, backslash or surrogate) is quoted as it is, a finite number
 * written by `String`, a boolean as its word. Anything else (escapes, a bigint that must throw, undefined) goes to
 * `JSON.stringify` (json-text.test.ts compares both over every UTF-16 code unit and generated values).
 */
export function scalarJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      // A loop costs about 35 instructions a character (`charCodeAt` dispatches on the string's representation each
      // time), the regular expression about 12 and 300 to start: the loop for short strings, the expression past that.
      if (value.length >= PLAIN_FROM) return PLAIN_STRING.test(value) ? `"${value}"` : JSON.stringify(value);
      for (let i = 0; i < value.length; i++) {
        const c = value.charCodeAt(i);
        if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(value);
      }
      return `"${value}"`;
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      return value === null ? 'null' : JSON.stringify(value);
  }
}

/** `JSON.stringify` of any value: an object or array by the call, anything else by `scalarJson` (undefined for one JSON leaves out). */
export function valueJson(value: unknown): string | undefined {
  return value !== null && typeof value === 'object' ? JSON.stringify(value) : scalarJson(value);
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/**
 * Index just past the string starting at `i` (which holds the opening quote), or the text's length when it is not
 * closed. The closing quote is found with `indexOf` (a native search, not a loop over every character): a quote
 * is escaped when an odd run of backslashes stands before it.
 */
export function skipString(text: string, i: number): number {
  let from = i + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return text.length;
    let before = quote - 1;
    while (before > i && text.charCodeAt(before) === BACKSLASH) before--;
    if (((quote - 1 - before) & 1) === 0) return quote + 1;
    from = quote + 1;
  }
}

/** Index just past the JSON value starting at `i` (no validation beyond nesting and strings). */
function skipValue(text: string, i: number): number {
  const first = text.charCodeAt(i);
  if (first === QUOTE) return skipString(text, i);
  if (first === 0x7b || first === 0x5b) {
    let depth = 0;
    let j = i;
    while (j < text.length) {
      const c = text.charCodeAt(j);
      if (c === QUOTE) {
        j = skipString(text, j);
        continue;
      }
      if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d) {
        depth--;
        if (depth === 0) return j + 1;
      }
      j++;
    }
    return text.length;
  }
  let j = i;
  while (j < text.length) {
    const c = text.charCodeAt(j);
    if (c === COMMA || c === 0x7d || c === 0x5d || isSpace(c)) break;
    j++;
  }
  return j;
}

/**
 * The raw text of the value of top-level key `key` in the JSON object `text`, or undefined when the key is
 * absent (or `text` is not an object). Nested keys of the same name are ignored.
 */
export function topLevelValue(text: string, key: string): string | undefined {
  let i = 0;
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== 0x7b) return undefined;
  i++;
  const quoted = `"${key}"`;
  while (i < text.length) {
    while (i < text.length && (isSpace(text.charCodeAt(i)) || text.charCodeAt(i) === COMMA)) i++;
    if (text.charCodeAt(i) !== QUOTE) return undefined;
    const keyEnd = skipString(text, i);
    const matches = keyEnd - i === quoted.length && text.startsWith(quoted, i);
    i = keyEnd;
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
    if (text.charCodeAt(i) !== COLON) return undefined;
    i++;
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
    const valueEnd = skipValue(text, i);
    if (matches) return text.slice(i, valueEnd);
    i = valueEnd;
  }
  return undefined;
}

const ROOM_POOL_SIZE = 512;
let roomPool: Buffer | undefined;
let roomOffset = ROOM_POOL_SIZE;

/**
 * A random SGLang `bootstrap_room` in [0, 2^63-1] as decimal text (exact: JS numbers stop at 2^53). Random
 * bytes come from a refilled pool so each room costs no syscall.
 */
export function randomBootstrapRoom(): string {
  if (roomOffset >= ROOM_POOL_SIZE) {
    roomPool ??= Buffer.allocUnsafe(ROOM_POOL_SIZE);
    randomFillSync(roomPool);
    roomOffset = 0;
  }
  const value = (roomPool as Buffer).readBigUInt64BE(roomOffset) & 0x7fff_ffff_ffff_ffffn;
  roomOffset += 8;
  return value.toString();
}
