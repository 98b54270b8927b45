import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An OTLP/HTTP endpoint that reads each export and answers 200 without decoding it (a collector elsewhere, as the gateway sees it). */
export interface DiscardingSink {
  readonly url: string;
  /** Exports received so far. */
  exports(): number;
  /** When the last export arrived (epoch ms; 0 before the first). */
  lastAt(): number;
  close(): Promise<void>;
}

export async function startDiscardingSink(): Promise<DiscardingSink> {
  let exports = 0;
  let lastAt = 0;
  const server = createServer((req, res) => {
    req.on('data', () => undefined);
    req.on('end', () => {
      exports++;
      lastAt = Date.now();
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports: () => exports,
    lastAt: () => lastAt,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
