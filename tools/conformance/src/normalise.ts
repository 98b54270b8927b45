import type { Exchange } from './exchange';

/**
 * Turns what the taps recorded for one client request into a form two routers can be compared in: values that
 * differ by nature between runs (request ids, transfer ids, rooms, engine ids, the prompt's bytes, addresses) become
 * placeholders numbered in order of first appearance within the request, so what is compared is their relation
 * (the same id on P and D, the transfer id built from the request id, the room P got is D's room), not the values.
 */

/** Headers whose presence or value is protocol; others (user-agent, content-length, …) are transport. */
export const PROTOCOL_HEADERS = ['x-request-id', 'x-data-parallel-rank', 'authorization', 'content-type', 'traceparent'] as const;

/** Body fields that are the client's own sampling and shape; kept as values. Everything else is walked too. */
const LONG_TEXT = 64;
/** Number lists longer than this (KV block ids) become one placeholder. */
const LONG_NUMBER_LIST = 4;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const LONG_HEX = /\b[0-9a-f]{16,}\b/gi;
const SHORT_HEX_SUFFIX = /:[0-9a-f]{6}$/;
const HEX_KEY = /^[0-9a-f]{16,}$/i;
/** JSON integers beyond 2^53 (SGLang rooms), quoted before parsing so they stay exact. */
const BIG_INT = /([:[,]\s*)(-?\d{16,})(?=\s*[,\]}])/g;
const BIG_INT_MARK = '\u0000bigint:';

/** Symbolic names of the addresses and ports of one setup: `127.0.60.3` → `P`, `8123` → `P.port`. */
export interface AddressBook {
  readonly hosts: ReadonlyMap<string, string>;
  readonly ports: ReadonlyMap<number, string>;
}

/** Placeholder numbering shared by all legs of one request. */
export class Placeholders {
  readonly #seen = new Map<string, string>();
  readonly #counts = new Map<string, number>();
  /** Values named before any leg is read (the client's media URLs and their uuids): same name whoever sends them first. */
  readonly seeds: ReadonlyMap<string, string>;

  constructor(seeds: ReadonlyMap<string, string> = new Map()) {
    this.seeds = seeds;
  }

  /**
   * The value's name: the seed's, else the one it got when first seen (whatever kind it was seen as: the request id
   * in a header and inside `xfer-<request id>` are one value), else a new `<kind#n>`, numbered per kind so that an
   * id one router sends and the other does not shifts no other name.
   */
  of(kind: string, value: string): string {
    const seeded = this.seeds.get(value);
    if (seeded !== undefined) return seeded;
    let name = this.#seen.get(value);
    if (name === undefined) {
      const n = (this.#counts.get(kind) ?? 0) + 1;
      this.#counts.set(kind, n);
      name = `<${kind}#${n}>`;
      this.#seen.set(value, name);
    }
    return name;
  }
}

/** Parses a JSON body keeping big integers exact (as marked strings); undefined when it is not JSON. */
export function parseBody(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    // The mark is written as a JSON escape: a raw control character inside a JSON string is a syntax error.
    return JSON.parse(text.replace(BIG_INT, (_m, lead: string, digits: string) => `${lead}"\\u0000bigint:${digits}"`));
  } catch {
    return undefined;
  }
}

function replaceAddresses(text: string, book: AddressBook): string {
  let out = text;
  for (const [host, name] of book.hosts) {
    // host:port first so the port gets its own name, then the bare host.
    out = out.replace(new RegExp(`${host.replace(/[.[\]]/g, '\\$&')}:(\\d+)`, 'g'), (_m, port: string) => {
      const p = book.ports.get(Number(port));
      return p ?? `${name}:${port}`;
    });
    out = out.split(host).join(name);
  }
  return out;
}

/** One string value, normalised: addresses named, ids and long texts replaced by placeholders. */
/** The kind of id a field holds, from its name: `<engine#1>` reads better than `<id#3>`, and numbers apart. */
export function idKind(path: string): string {
  const last = path.slice(path.lastIndexOf('.') + 1).toLowerCase();
  if (last.includes('engine_id')) return 'engine';
  if (last.includes('transfer_id')) return 'transfer';
  if (last.includes('request_id') || last === 'x-request-id') return 'request';
  return 'id';
}

export function normaliseString(value: string, book: AddressBook, ph: Placeholders, kind = 'id'): string {
  if (value.startsWith(BIG_INT_MARK)) return ph.of('big', value.slice(BIG_INT_MARK.length));
  const seeded = ph.seeds.get(value);
  if (seeded !== undefined) return seeded;
  if (value.length > LONG_TEXT && !value.includes('://')) return ph.of('text', value);
  let out = replaceAddresses(value, book);
  out = out.replace(UUID, (id) => ph.of(kind, id.toLowerCase()));
  out = out.replace(LONG_HEX, (id) => ph.of(kind, id.toLowerCase()));
  // A random short suffix (vLLM's EPD proxy names encoder requests `<request id>:<item>:<6 hex>`).
  out = out.replace(SHORT_HEX_SUFFIX, ':<hex>');
  if (out.length > LONG_TEXT) return ph.of('text', out);
  return out;
}

/** Flattens a JSON value to `path → normalised scalar` (`a.b[0].c`); empty objects and arrays are kept as values. */
export function flatten(
  value: unknown,
  book: AddressBook,
  ph: Placeholders,
  prefix = '',
  out: Record<string, unknown> = {},
): Record<string, unknown> {
  if (Array.isArray(value) && value.length > LONG_NUMBER_LIST && value.every((v) => typeof v === 'number' || Array.isArray(v))) {
    // Engine-chosen numbers (KV block ids): what matters is that they travel unchanged, not their values.
    out[prefix] = ph.of('list', JSON.stringify(value));
  } else if (Array.isArray(value)) {
    if (value.length === 0) out[prefix] = [];
    value.forEach((v, i) => flatten(v, book, ph, `${prefix}[${i}]`, out));
  } else if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) out[prefix] = {};
    for (const [k, v] of entries) {
      // Keys can be ids too (the EPD encoders key their answers by the item's hash).
      const key = HEX_KEY.test(k) || ph.seeds.has(k) ? normaliseString(k, book, ph) : k;
      flatten(v, book, ph, prefix === '' ? key : `${prefix}.${key}`, out);
    }
  } else if (typeof value === 'string') {
    out[prefix] = normaliseString(value, book, ph, idKind(prefix));
  } else if (typeof value === 'number' && /room/i.test(prefix)) {
    // Rooms are random: a small one parses as an ordinary number, and is a placeholder like the big ones.
    out[prefix] = ph.of('big', String(value));
  } else if (typeof value === 'number' && /port/i.test(prefix) && book.ports.has(value)) {
    out[prefix] = book.ports.get(value);
  } else {
    out[prefix] = value;
  }
  return out;
}

/** A normalised leg of one request. */
export interface Leg {
  /** Family and ordinal: `E#2` is the second encoder leg, whichever encoder served it. */
  readonly id: string;
  /** The stage family: `E`, `P`, `D`, `P.bootstrap`, `D.release`. */
  readonly stage: string;
  /** The tap (engine) that served it: `E1`. */
  readonly target: string;
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The request body, flattened (`body.kv_transfer_params.transfer_id`). */
  readonly fields: Readonly<Record<string, unknown>>;
  /** Protocol fields of the engine's answer (a prefill's `kv_transfer_params`), flattened. */
  readonly answer: Readonly<Record<string, unknown>>;
}

export interface Trace {
  readonly legs: readonly Leg[];
  /** Call order as phases of stage families ({@link phases}): `P,D` sequential, `D+P` concurrent, `E,P,D`. */
  readonly order: readonly string[];
  /** Pairs of legs of different families that were in flight at the same time (`D#1~P#1`, names sorted). */
  readonly overlaps: readonly string[];
}

/** Answer fields that are protocol (the rest of an answer is the generated text, ids and usage). */
const ANSWER_FIELDS = ['kv_transfer_params', 'ec_transfer_params'];

function answerFields(x: Exchange, book: AddressBook, ph: Placeholders): Record<string, unknown> {
  const parsed = parseBody(x.responseBody);
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
  const out: Record<string, unknown> = {};
  for (const f of ANSWER_FIELDS) {
    const v = (parsed as Record<string, unknown>)[f];
    if (v !== undefined) flatten(v, book, ph, f, out);
  }
  return out;
}

/** The `x-request-id` suffix of Triad's KV release leg (docs/kv-ownership.md). */
const RELEASE_ID_SUFFIX = '-kv-release';

/**
 * The stage an exchange is named after: a router's bootstrap call is `P.bootstrap`, and Triad's KV release leg to a
 * decode `D.release`, so neither takes the ordinal of a request's own legs (a retry's decode stays `D#2`).
 */
function stageOf(x: Exchange): string {
  if (x.port === 'bootstrap') return `${x.stage}.bootstrap`;
  if (x.headers['x-request-id']?.endsWith(RELEASE_ID_SUFFIX) === true) return `${x.stage}.release`;
  return x.stage;
}

/**
 * Exchanges by start, except that legs of one family in flight together (an encoder fan-out) are ordered by what
 * they carry (larger body first, then stage name): which of two concurrent encoder requests left first is luck.
 */
export function callOrder(exchanges: readonly Exchange[]): Exchange[] {
  const byStart = [...exchanges].sort((a, b) => a.startedAt - b.startedAt);
  const out: Exchange[] = [];
  let i = 0;
  while (i < byStart.length) {
    const first = byStart[i];
    const group = [first];
    let end = first.endedAt;
    let j = i + 1;
    while (j < byStart.length && familyOf(stageOf(byStart[j])) === familyOf(stageOf(first)) && byStart[j].startedAt < end) {
      group.push(byStart[j]);
      end = Math.max(end, byStart[j].endedAt);
      j++;
    }
    group.sort((a, b) => b.body.length - a.body.length || a.stage.localeCompare(b.stage));
    out.push(...group);
    i = j;
  }
  return out;
}

/** `E0` → `E`, `P.bootstrap` stays. */
export function familyOf(stage: string): string {
  return stage.replace(/\d+(?=$|\.)/, '');
}

/** Normalises the protocol exchanges of one request (in any order; they are sorted by start). */
export function normalise(exchanges: readonly Exchange[], book: AddressBook, seeds: ReadonlyMap<string, string> = new Map()): Trace {
  const ph = new Placeholders(seeds);
  const sorted = callOrder(exchanges);
  const counts = new Map<string, number>();
  const legs: Leg[] = [];
  const timed: { id: string; stage: string; x: Exchange }[] = [];
  for (const x of sorted) {
    const stage = stageOf(x);
    const family = familyOf(stage);
    const n = (counts.get(family) ?? 0) + 1;
    counts.set(family, n);
    const id = `${family}#${n}`;
    const headers: Record<string, string> = {};
    for (const h of PROTOCOL_HEADERS) {
      const v = x.headers[h];
      if (v === undefined) continue;
      headers[h] = h === 'traceparent' ? '<present>' : normaliseString(v, book, ph, idKind(h));
    }
    const parsed = parseBody(x.body);
    const fields = parsed === undefined ? (x.body === '' ? {} : { body: ph.of('text', x.body) }) : flatten(parsed, book, ph, 'body');
    legs.push({
      id,
      stage: family,
      target: stage,
      method: x.method,
      path: x.path,
      status: x.status,
      headers,
      fields,
      answer: answerFields(x, book, ph),
    });
    timed.push({ id, stage, x });
  }
  const overlaps: string[] = [];
  for (let i = 0; i < timed.length; i++) {
    for (let j = i + 1; j < timed.length; j++) {
      const a = timed[i];
      const b = timed[j];
      if (familyOf(a.stage) === familyOf(b.stage)) continue;
      if (a.x.startedAt < b.x.endedAt && b.x.startedAt < a.x.endedAt) overlaps.push([a.id, b.id].sort().join('~'));
    }
  }
  return {
    legs,
    order: phases(timed.map((t) => ({ family: familyOf(t.stage), startedAt: t.x.startedAt, endedAt: t.x.endedAt }))),
    overlaps: overlaps.sort(),
  };
}

/**
 * Call order as phases: legs in flight together form one phase, named by its families sorted and joined with `+`
 * (`D+P` for a concurrent dispatch, whichever left first); phases in time order, repeats collapsed: `E,P,D`.
 */
export function phases(legs: readonly { family: string; startedAt: number; endedAt: number }[]): string[] {
  const sorted = [...legs].sort((a, b) => a.startedAt - b.startedAt);
  const out: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    const families = new Set([sorted[i].family]);
    let end = sorted[i].endedAt;
    let j = i + 1;
    while (j < sorted.length && sorted[j].startedAt < end) {
      families.add(sorted[j].family);
      end = Math.max(end, sorted[j].endedAt);
      j++;
    }
    const name = [...families].sort().join('+');
    if (out[out.length - 1] !== name) out.push(name);
    i = j;
  }
  return out;
}
