import type { ScheduleBatchReply } from './scheduling';

/**
 * The JSON of each endpoint ref a reply named before. The scheduling lib's refs are frozen, nested objects and
 * arrays included, and rebuilt when the endpoint's address changes (`IndexedEndpoint.ref`), so such a ref's text
 * cannot go stale; a ref with anything unfrozen in it is serialized every time.
 */
const refJson = new WeakMap<object, string>();

function isDeepFrozen(v: object): boolean {
  if (!Object.isFrozen(v)) return false;
  for (const k of Object.keys(v)) {
    const inner: unknown = (v as Record<string, unknown>)[k];
    if (inner !== null && typeof inner === 'object' && !isDeepFrozen(inner)) return false;
  }
  return true;
}

function endpointRefJson(ref: unknown): string {
  if (ref === null || typeof ref !== 'object') return JSON.stringify(ref);
  let text = refJson.get(ref);
  if (text === undefined) {
    text = JSON.stringify(ref);
    if (isDeepFrozen(ref)) refJson.set(ref, text);
  }
  return text;
}

/**
 * A string's JSON: quoted as it is when every character is printable ASCII other than `"` and `\\` (ids, keys,
 * modes, endpoint names), else `JSON.stringify`'s. A `JSON.stringify` call costs its entry into the runtime (several
 * hundred instructions) before the first character; a reply has a dozen short strings.
 */
function stringJson(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0x7e) return JSON.stringify(s);
  }
  return '"' + s + '"';
}

/** A value's JSON as `JSON.stringify` writes it, with the primitives written here (objects and arrays go to it). */
function valueJson(v: unknown): string {
  if (typeof v === 'string') return stringJson(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  // JSON writes a finite number as `String` does (−0 as 0), and NaN and the infinities as null.
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  if (v === null) return 'null';
  return JSON.stringify(v);
}

/** `{"k":v,…}` of `obj`'s own enumerable keys, in their order, `refs` naming the keys whose values are endpoint refs. */
function objectJson(obj: Record<string, unknown>, refKey1: string, refKey2: string, refsKey: string): string {
  let out = '{';
  for (const k in obj) {
    if (!Object.hasOwn(obj, k)) continue;
    const v = obj[k];
    // JSON.stringify leaves out of an object what it cannot write.
    if (unwritable(v)) continue;
    let text: string;
    if (k === refKey1 || k === refKey2) text = endpointRefJson(v);
    else if (k === refsKey && Array.isArray(v)) text = refsJson(v);
    else text = valueJson(v);
    out += (out.length === 1 ? '' : ',') + stringJson(k) + ':' + text;
  }
  return out + '}';
}

function refsJson(refs: readonly unknown[]): string {
  let out = '[';
  for (let i = 0; i < refs.length; i++) out += (i === 0 ? '' : ',') + (unwritable(refs[i]) ? 'null' : endpointRefJson(refs[i]));
  return out + ']';
}

/** Whether `v` is an object this module writes key by key (else `JSON.stringify` writes it: arrays, `toJSON`). */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && typeof (v as { toJSON?: unknown }).toJSON !== 'function';
}

/** What JSON.stringify writes for a value it cannot write (undefined, a function, a symbol) in an array: null. */
function unwritable(v: unknown): boolean {
  return v === undefined || typeof v === 'function' || typeof v === 'symbol';
}

function listJson(list: unknown, item: (v: Record<string, unknown>) => string): string {
  if (!Array.isArray(list)) return JSON.stringify(list);
  let out = '[';
  for (let i = 0; i < list.length; i++) {
    const v: unknown = list[i];
    out += (i === 0 ? '' : ',') + (isPlainObject(v) ? item(v) : unwritable(v) ? 'null' : valueJson(v));
  }
  return out + ']';
}

function attemptJson(a: Record<string, unknown>): string {
  return objectJson(a, 'endpoint', 'prefill', '');
}

function encoderJson(e: Record<string, unknown>): string {
  return objectJson(e, 'endpoint', '', 'alternates');
}

function decisionJson(d: Record<string, unknown>): string {
  let out = '{';
  for (const k in d) {
    if (!Object.hasOwn(d, k)) continue;
    const v = d[k];
    if (unwritable(v)) continue;
    const text = k === 'attempts' ? listJson(v, attemptJson) : k === 'encoders' ? listJson(v, encoderJson) : valueJson(v);
    out += (out.length === 1 ? '' : ',') + stringJson(k) + ':' + text;
  }
  return out + '}';
}

/**
 * A schedule batch reply's JSON, the very text `JSON.stringify(reply)` gives (`scheduling-write.test.ts` holds them
 * side by side), with each endpoint ref's text written once and reused: the refs were most of a reply's bytes
 * (address, pod, the EC consumers' control addresses) and of the scheduler's `JSON.stringify` per batch.
 */
export function scheduleReplyJson(reply: ScheduleBatchReply): string {
  if (!isPlainObject(reply) || !('decisions' in reply) || !Array.isArray(reply.decisions)) return JSON.stringify(reply);
  let out = '{';
  const r = reply as unknown as Record<string, unknown>;
  for (const k in r) {
    if (!Object.hasOwn(r, k)) continue;
    const v = r[k];
    if (unwritable(v)) continue;
    out += (out.length === 1 ? '' : ',') + stringJson(k) + ':' + (k === 'decisions' ? listJson(v, decisionJson) : valueJson(v));
  }
  return out + '}';
}
