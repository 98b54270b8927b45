import { request, type IncomingMessage } from 'node:http';

/** A streamed answer its reader stopped reading: `res` is paused; `chunks` (the first one included) fills on resume. */
export interface StalledStream {
  readonly res: IncomingMessage;
  readonly chunks: Buffer[];
}

/**
 * POSTs `body` as JSON to `url` and stops reading the answer once its first bytes arrived, as a slow client does:
 * node:http then stops reading the socket once its own small buffer is full, the kernel's buffers fill, and the
 * sender meets backpressure. `res.resume()` reads on.
 */
export function stalledStream(url: string | URL, body: unknown): Promise<StalledStream> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.once('data', (first: Buffer) => {
        res.pause();
        const chunks = [first];
        res.on('data', (c: Buffer) => chunks.push(c));
        resolve({ res, chunks });
      });
    });
    req.once('error', reject);
    req.end(JSON.stringify(body));
  });
}
