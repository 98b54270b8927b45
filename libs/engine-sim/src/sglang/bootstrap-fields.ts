import { EngineHttpError } from '../http/engine-error';
import { rawArrayElements, rawTopLevelField } from './raw-json';

/** Where one item of a PD request pairs with its peer: `room` is the exact decimal text. */
export interface BootstrapTarget {
  /** Absent when the router sent none (a decode then cannot reach any prefill). */
  readonly host: string | undefined;
  /** Absent (null in the body): the receiving server uses its own `--disaggregation-bootstrap-port`. */
  readonly port: number | undefined;
  readonly room: string;
}

/** The PD fields of a request: one target per batch item, or no room at all (SGLang aborts those with a 400). */
export type PdFields = { readonly ok: true; readonly items: readonly BootstrapTarget[] } | { readonly ok: false };

const MAX_ROOM = (1n << 64n) - 1n;

/** SGLang's scheduler abort for a PD request without a room (the rid is appended as `req.rid='…'`). */
export const MISSING_ROOM_MESSAGE = 'Invalid request: Disaggregated request received without bootstrap room id';

/** Canonical decimal text of a room given as a JSON integer (or numeric string), or undefined when invalid. */
export function canonicalRoom(raw: string): string | undefined {
  const text = raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  if (!/^\d{1,20}$/.test(text)) return undefined;
  const value = BigInt(text);
  return value <= MAX_ROOM ? value.toString() : undefined;
}

/** The DP rank a room maps to (SGLang's follow-bootstrap-room policy: room modulo dp size). */
export function rankOfRoom(room: string, dpSize: number): number {
  return Number(BigInt(room) % BigInt(dpSize));
}

function bad(message: string): EngineHttpError {
  return new EngineHttpError(400, message);
}

/** How many prompts and samples per prompt a request has: lists carry one value per prompt or per sample. */
export interface BatchShape {
  readonly size: number;
  readonly batched: boolean;
  /** `n` (parallel sampling): lists may then also hold `size * samples` values, one per sample. */
  readonly samples: number;
}

/** The list entries that belong to each prompt (the first of its samples), or a 400 when the length fits neither. */
function pickPerItem<T>(name: string, list: readonly T[], shape: BatchShape): T[] {
  const { size, batched, samples } = shape;
  if (list.length === size) return [...list];
  if (samples > 1 && list.length === size * samples) return Array.from({ length: size }, (_, i) => list[i * samples]);
  throw bad(`${name} has ${list.length} entries but the request has ${size} ${batched ? 'batch items' : 'prompt (not a batch)'}`);
}

/** A field that is one value for the whole request or a list with one value per item (SGLang batch fields). */
function perItem<T>(name: string, value: unknown, shape: BatchShape, read: (v: unknown) => T): T[] {
  if (!Array.isArray(value)) return Array.from({ length: shape.size }, () => read(value));
  return pickPerItem(name, value, shape).map(read);
}

function hostOf(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw bad('bootstrap_host: Input should be a valid string');
  return v.length > 0 ? v : undefined;
}

function portOf(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 65535) throw bad('bootstrap_port: Input should be a valid integer');
  return v;
}

/** Raw room texts per item: a list as given, a scalar expanded to room + i for a batch (GenerateReqInput). */
function roomsOf(rawBody: string, shape: BatchShape): (string | undefined)[] {
  const { size } = shape;
  let raw: string | undefined;
  try {
    raw = rawTopLevelField(rawBody, 'bootstrap_room');
  } catch {
    raw = undefined;
  }
  if (raw === undefined || raw === 'null') return Array.from({ length: size }, () => undefined);
  const list = rawArrayElements(raw);
  if (list) return pickPerItem('bootstrap_room', list, shape).map((r) => (r === 'null' ? undefined : parseRoom(r)));
  const room = parseRoom(raw);
  return Array.from({ length: size }, (_, i) => (BigInt(room) + BigInt(i)).toString());
}

function parseRoom(raw: string): string {
  const room = canonicalRoom(raw);
  if (room === undefined) throw bad(`bootstrap_room: Input should be a valid non-negative integer, got ${raw}`);
  return room;
}

/**
 * Reads bootstrap_host/port/room for `shape.size` items (1 unless a batch). Malformed values are a 400 before dispatch,
 * as pydantic rejects them; a missing room is reported as `{ ok: false }` because SGLang only notices it in the
 * scheduler (the answer then depends on the route and on streaming).
 */
export function pdFieldsOf(rawBody: string, body: Record<string, unknown>, shape: BatchShape): PdFields {
  const hosts = perItem('bootstrap_host', body['bootstrap_host'], shape, hostOf);
  const ports = perItem('bootstrap_port', body['bootstrap_port'], shape, portOf);
  const rooms = roomsOf(rawBody, shape);
  if (rooms.some((r) => r === undefined)) return { ok: false };
  return { ok: true, items: rooms.map((room, i) => ({ host: hosts[i], port: ports[i], room: room as string })) };
}
