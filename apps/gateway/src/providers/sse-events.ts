/** One server-sent event: its `event:` name ('' when absent), its `data:` lines joined, and its exact text. */
export interface SseEvent {
  readonly event: string;
  readonly data: string;
  /** The event as it arrived, blank line included, to relay it byte for byte. */
  readonly raw: string;
}

/**
 * Splits an SSE byte stream into events (a blank line ends one; `\n`, `\r\n` and `\r` line ends, as the
 * EventSource spec allows). Chunks may cut events, lines and UTF-8 sequences anywhere.
 */
export class SseEventSplitter {
  readonly #decoder = new TextDecoder();
  #buffer = '';

  push(chunk: Uint8Array): SseEvent[] {
    this.#buffer += this.#decoder.decode(chunk, { stream: true });
    return this.#drain(false);
  }

  /** The last event when the stream ended without its blank line. */
  end(): SseEvent[] {
    this.#buffer += this.#decoder.decode();
    return this.#drain(true);
  }

  #drain(final: boolean): SseEvent[] {
    const events: SseEvent[] = [];
    for (;;) {
      const m = /\r\n\r\n|\n\n|\r\r/.exec(this.#buffer);
      if (m === null) break;
      const end = m.index + m[0].length;
      events.push(parse(this.#buffer.slice(0, end)));
      this.#buffer = this.#buffer.slice(end);
    }
    if (final && this.#buffer.trim() !== '') {
      events.push(parse(this.#buffer));
      this.#buffer = '';
    }
    return events;
  }
}

function parse(raw: string): SseEvent {
  let event = '';
  const data: string[] = [];
  for (const line of raw.split(/\r\n|\n|\r/)) {
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  return { event, data: data.join('\n'), raw };
}
