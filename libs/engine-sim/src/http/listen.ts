import type { AddressInfo, Server } from 'node:net';

/**
 * Starts `server` listening on `host:port` (0: any free port) and resolves with the port it got; a bind error
 * (EADDRINUSE, EADDRNOTAVAIL) rejects instead of being thrown later as an unhandled 'error' event.
 */
export function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
