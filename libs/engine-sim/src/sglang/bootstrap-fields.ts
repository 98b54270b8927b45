import { EngineHttpError } from '../http/engine-error';
import { rawTopLevelField } from './raw-json';

/** The PD fields every SGLang prefill and decode request carries; `room` is the exact decimal text. */
export interface BootstrapFields {
  readonly host: string;
  readonly port: number;
  readonly room: string;
}

const MAX_ROOM = (1n << 64n) - 1n;

/** Canonical decimal text of a room given as a JSON integer (or numeric string), or undefined when invalid. */
export function canonicalRoom(raw: string): string | undefined {
  const text = raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  if (!/^\d{1,20}$/.test(text)) return undefined;
  const value = BigInt(text);
  return value <= MAX_ROOM ? value.toString() : undefined;
}

/**
 * Reads bootstrap_host/port/room; SGLang rejects a PD request without them. Batched rooms (arrays) are outside
 * what the simulator supports (one request per room).
 */
export function bootstrapFieldsOf(rawBody: string, body: Record<string, unknown>, mode: 'prefill' | 'decode'): BootstrapFields {
  const host = body['bootstrap_host'];
  const port = body['bootstrap_port'];
  let rawRoom: string | undefined;
  try {
    rawRoom = rawTopLevelField(rawBody, 'bootstrap_room');
  } catch {
    rawRoom = undefined;
  }
  if (typeof host !== 'string' || host.length === 0 || typeof port !== 'number' || !Number.isInteger(port) || rawRoom === undefined ||
      rawRoom === 'null') {
    throw new EngineHttpError(
      400, `Disaggregation mode is ${mode}, but bootstrap_host, bootstrap_port and bootstrap_room are required in the request.`,
    );
  }
  if (rawRoom.startsWith('[')) throw new EngineHttpError(400, 'batched requests (bootstrap_room lists) are not supported by the simulator');
  const room = canonicalRoom(rawRoom);
  if (room === undefined) throw new EngineHttpError(400, `bootstrap_room: Input should be a valid non-negative integer, got ${rawRoom}`);
  return { host, port, room };
}

/** The DP rank a room maps to (SGLang's follow-bootstrap-room policy: room modulo dp size). */
export function rankOfRoom(room: string, dpSize: number): number {
  return Number(BigInt(room) % BigInt(dpSize));
}
