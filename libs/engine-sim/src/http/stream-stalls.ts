import type { ServerResponse } from 'node:http';

/** Streamed generations now waiting for their reader, and the output tokens they had written when they stopped. */
export interface StalledStreams {
  readonly streams: number;
  readonly tokensWritten: number;
}

/**
 * The streamed generations of one engine that wait for their socket to drain: the reader (a client, or a proxy
 * that stopped reading for its own slow client) reported backpressure, so the engine produces nothing more for them
 * until it drains. A test reads it to see a proxy hold the engine back.
 */
export class StreamStalls {
  #streams = 0;
  #tokens = 0;

  /**
   * Resolves once `res` takes more (at once when it already does, or is gone). Until then the generation counts as
   * stalled, with the `written` output tokens it wrote so far.
   */
  drained(res: ServerResponse, written: number): Promise<void> {
    if (res.destroyed || !res.writableNeedDrain) return Promise.resolve();
    this.#streams += 1;
    this.#tokens += written;
    return new Promise<void>((resolve) => {
      // Whichever comes first ends the wait; the other listener goes too, so a long stream that stalls often
      // leaves none behind.
      const done = (): void => {
        res.off('drain', done);
        res.off('close', done);
        this.#streams -= 1;
        this.#tokens -= written;
        resolve();
      };
      res.once('drain', done);
      res.once('close', done);
    });
  }

  snapshot(): StalledStreams {
    return { streams: this.#streams, tokensWritten: this.#tokens };
  }
}
