import type { Dispatcher } from 'undici';
import { invalidArgumentError } from './errors';

/** A request ready to write: its head (latin1) and body. */
export interface PreparedRequest {
  readonly head: string;
  readonly body: Buffer | string | undefined;
  /** The caller asked for `connection: close`: the connection is not kept after this request. */
  readonly close: boolean;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** undici's (and node's) rule for a header value: no control characters but HTAB. */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const INVALID_PATH = /[^\u0021-\u00ff]/;

/**
 * The request head exactly as undici writes it (`host` first, `connection: keep-alive`, the caller's headers in
 * their order, `content-length` last), with undici's checks: a header name must be a token and a value must hold
 * no control character (an `x-request-id` comes from the client), and the headers the transport owns
 * (`transfer-encoding`, `keep-alive`, `upgrade`, `expect`) are refused. Throws an InvalidArgumentError-coded error.
 */
export function prepareRequest(options: Dispatcher.DispatchOptions, hostHeader: string): PreparedRequest {
  const method = options.method;
  const path = options.path;
  if (typeof method !== 'string' || (method !== 'POST' && !TOKEN.test(method))) throw invalidArgumentError('invalid request method');
  if (typeof path !== 'string' || (!checkedPaths.has(path) && !isValidPath(path))) throw invalidArgumentError('invalid request path');
  const body = options.body;
  if (body !== undefined && body !== null && typeof body !== 'string' && !Buffer.isBuffer(body)) {
    throw invalidArgumentError('only string and Buffer bodies are supported');
  }
  const state = { host: hostHeader, close: false, lines: '' };
  const headers = options.headers;
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2) addHeader(state, String(headers[i]), headers[i + 1]);
  } else if (headers !== undefined && headers !== null) {
    const record = headers as Record<string, string | string[] | undefined>;
    const plain = plainHeaderLines(record);
    if (plain !== undefined) state.lines = plain;
    else for (const key in record) addHeader(state, key, record[key]);
  }
  const length = body === undefined || body === null ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  const head =
    `${method} ${path} HTTP/1.1\r\nhost: ${state.host}\r\n${state.close ? 'connection: close' : 'connection: keep-alive'}\r\n` +
    `${state.lines}content-length: ${length}\r\n\r\n`;
  return { head, body: length === 0 ? undefined : (body as Buffer | string), close: state.close };
}

/** Kept at most: the legs use a handful of header names and paths, and a caller cannot grow the sets past this. */
const CHECKED_KEPT = 256;
/** Paths already found valid (every leg of a stage goes to the same few). */
const checkedPaths = new Set<string>();
/** Header names already found to be tokens the transport does not own (`addHeader`'s switch passes them as they are). */
const plainNames = new Set<string>();
/** The names `addHeader` treats apart, lower-cased. */
const OWNED_NAMES = new Set(['host', 'expect', 'upgrade', 'keep-alive', 'connection', 'content-length', 'transfer-encoding']);

function isValidPath(path: string): boolean {
  if ((path[0] !== '/' && !path.startsWith('http://') && !path.startsWith('https://')) || INVALID_PATH.test(path)) return false;
  if (checkedPaths.size < CHECKED_KEPT) checkedPaths.add(path);
  return true;
}

function isPlainName(key: string): boolean {
  if (plainNames.has(key)) return true;
  if (!TOKEN.test(key) || OWNED_NAMES.has(key.toLowerCase())) return false;
  if (plainNames.size < CHECKED_KEPT) plainNames.add(key);
  return true;
}

/**
 * The header lines of a record whose every header is a string under a plain name (a token the transport does not
 * own, seen before), with their values checked together in one test instead of two regular expressions per header
 * (one regular expression test costs several hundred instructions); undefined for anything else, which `addHeader`
 * reads one header at a time and throws the error of the first bad one. The lines are the same either way.
 */
function plainHeaderLines(record: Record<string, string | string[] | undefined>): string | undefined {
  let lines = '';
  let values = '';
  for (const key in record) {
    const value = record[key];
    if (value === undefined) continue;
    if (typeof value !== 'string' || !isPlainName(key)) return undefined;
    values += value;
    lines += `${key}: ${value}\r\n`;
  }
  return INVALID_VALUE.test(values) ? undefined : lines;
}

interface HeadState {
  host: string;
  close: boolean;
  lines: string;
}

function addHeader(state: HeadState, key: string, value: unknown): void {
  if (value === undefined) return;
  if (!TOKEN.test(key)) throw invalidArgumentError('invalid header key');
  if (Array.isArray(value)) {
    for (const one of value) addHeader(state, key, one);
    return;
  }
  if (value !== null && typeof value === 'object') throw invalidArgumentError(`invalid ${key} header`);
  const text = value === null ? '' : typeof value === 'string' ? value : String(value);
  if (INVALID_VALUE.test(text)) throw invalidArgumentError(`invalid ${key} header`);
  // Only names of a length the transport cares about are lower-cased (most headers pass without it).
  switch (key.length) {
    case 4:
      if (key.toLowerCase() === 'host') {
        state.host = text;
        return;
      }
      break;
    case 6:
      if (key.toLowerCase() === 'expect') throw invalidArgumentError('expect header not supported');
      break;
    case 7:
      if (key.toLowerCase() === 'upgrade') throw invalidArgumentError(`invalid ${key} header`);
      break;
    case 10: {
      const lower = key.toLowerCase();
      if (lower === 'keep-alive') throw invalidArgumentError(`invalid ${key} header`);
      if (lower === 'connection') {
        for (const token of text.toLowerCase().split(',')) {
          const trimmed = token.trim();
          if (!TOKEN.test(trimmed)) throw invalidArgumentError('invalid connection header');
          if (trimmed === 'close') state.close = true;
        }
        return;
      }
      break;
    }
    case 14:
      // The length is the body's, written last.
      if (key.toLowerCase() === 'content-length') return;
      break;
    case 17:
      if (key.toLowerCase() === 'transfer-encoding') throw invalidArgumentError(`invalid ${key} header`);
      break;
  }
  state.lines += `${key}: ${text}\r\n`;
}
