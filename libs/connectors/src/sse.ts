/** One server-sent event: its `event:` name ('' when absent), its `data:` lines joined, and its exact text. */
export interface SseEvent {
  readonly event: string;
  readonly data: string;
  /** The event as it arrived, blank line included, to relay it byte for byte. */
  readonly raw: string;
}

const LF = 0x0a;
const CR = 0x0d;
const LF_LF = Buffer.from('\n\n');
const EMPTY = Buffer.alloc(0);

/**
 * Cuts an SSE byte stream at event boundaries (a blank line ends an event; `\n`, `\r\n` and `\r` line ends, as the
 * EventSource spec allows), holding the start of an event until its end arrives. The cut is made on the bytes, at a
 * line end, so what comes out never ends inside a multi-byte UTF-8 character and decodes without a streaming decoder.
 * A chunk that ends on a boundary while nothing is held comes back as the same Buffer, so relays that change nothing
 * write the engine's bytes as they are.
 */
export class SseEventSplitter {
  #held: Buffer | undefined;

  /** The bytes of every event this chunk completes (possibly none); the rest is held for the next chunk. */
  push(chunk: Buffer): Buffer {
    const data = this.#held === undefined ? chunk : Buffer.concat([this.#held, chunk]);
    this.#held = undefined;
    const cut = lastEventEnd(data);
    if (cut < 0) {
      // The caller may reuse its chunk's memory; a held chunk is copied.
      this.#held = data === chunk ? Buffer.from(chunk) : data;
      return EMPTY;
    }
    if (cut === data.length) return data;
    this.#held = Buffer.from(data.subarray(cut));
    return data.subarray(0, cut);
  }

  /** An unterminated last event when the stream ends (empty when there is none). */
  end(): Buffer {
    const rest = this.#held ?? EMPTY;
    this.#held = undefined;
    return rest;
  }
}

const COLON = 0x3a;

/**
 * `bytes` (whole events) without the comment lines and blank lines before its first event: vLLM writes `: keep-alive`
 * comments while a stream is idle (`--sse-keep-alive-interval`), before its first token too. Those are no answer yet.
 * The same Buffer when it starts with an event.
 */
export function withoutLeadingComments(bytes: Buffer): Buffer {
  let at = 0;
  while (at < bytes.length) {
    const c = bytes[at];
    if (c === LF) at += 1;
    else if (c === CR) at += bytes[at + 1] === LF ? 2 : 1;
    else if (c === COLON) {
      const lf = bytes.indexOf(LF, at);
      const cr = bytes.indexOf(CR, at);
      const end = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      if (end < 0) return EMPTY;
      at = end;
    } else break;
  }
  return at === 0 ? bytes : bytes.subarray(at);
}

/** The events in `bytes`, one Buffer each with its blank line; an unterminated tail is the last one. */
export function splitSseEvents(bytes: Buffer): Buffer[] {
  const events: Buffer[] = [];
  const cr = bytes.indexOf(CR) >= 0;
  let from = 0;
  while (from < bytes.length) {
    const end = nextEventEnd(bytes, from, cr);
    if (end < 0) break;
    events.push(bytes.subarray(from, end));
    from = end;
  }
  if (from < bytes.length) events.push(from === 0 ? bytes : bytes.subarray(from));
  return events;
}

/** The fields of one event's text (other fields than `event` and `data`, and comments, are ignored). */
export function parseSseEvent(raw: string): SseEvent {
  // The engines' shape, one `data:` line and the blank line: read without going line by line.
  if (raw.startsWith('data:')) {
    const end = raw.indexOf('\n');
    if (end === raw.length - 2 && raw.charCodeAt(end + 1) === LF && !raw.includes('\r')) {
      return { event: '', data: raw.slice(raw.charCodeAt(5) === 0x20 ? 6 : 5, end), raw };
    }
  }
  let event = '';
  let data: string | undefined;
  let at = 0;
  while (at < raw.length) {
    let end = at;
    while (end < raw.length && raw.charCodeAt(end) !== LF && raw.charCodeAt(end) !== CR) end++;
    const line = raw.slice(at, end);
    at = raw.charCodeAt(end) === CR && raw.charCodeAt(end + 1) === LF ? end + 2 : end + 1;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data = data === undefined ? value : `${data}\n${value}`;
    else if (field === 'event') event = value;
  }
  return { event, data: data ?? '', raw };
}

/** Every event in `bytes`, parsed. */
export function sseEvents(bytes: Buffer): SseEvent[] {
  return splitSseEvents(bytes).map((e) => parseSseEvent(e.toString('utf8')));
}

/** Index just past the last event boundary in `bytes`, or -1. */
function lastEventEnd(bytes: Buffer): number {
  // Engines write whole events ending in `\n\n`: then the end is the last boundary, found without a search.
  const n = bytes.length;
  if (n >= 2 && bytes[n - 1] === LF && bytes[n - 2] === LF) return n;
  // Otherwise one native search, unless a CR in the stream asks for the byte-by-byte scan.
  if (bytes.indexOf(CR) < 0) {
    const at = bytes.lastIndexOf(LF_LF);
    return at < 0 ? -1 : at + 2;
  }
  let last = -1;
  for (let end = nextEventEnd(bytes, 0, true); end >= 0; end = nextEventEnd(bytes, end, true)) last = end;
  return last;
}

/** Index just past the first blank line at or after `from`, or -1; `cr` says whether `bytes` holds a CR. */
function nextEventEnd(bytes: Buffer, from: number, cr: boolean): number {
  if (!cr) {
    const at = bytes.indexOf(LF_LF, from);
    return at < 0 ? -1 : at + 2;
  }
  let afterLineEnd = false;
  for (let i = from; i < bytes.length; i++) {
    const c = bytes[i];
    if (c !== LF && c !== CR) {
      afterLineEnd = false;
      continue;
    }
    let next = i + 1;
    if (c === CR) {
      // A CR at the end may be the first half of a CRLF: undecided until the next byte comes.
      if (next === bytes.length) return -1;
      if (bytes[next] === LF) next++;
    }
    if (afterLineEnd) return next;
    afterLineEnd = true;
    i = next - 1;
  }
  return -1;
}
