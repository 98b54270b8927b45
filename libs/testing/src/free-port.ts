import { createServer } from 'node:net';

/**
 * Ports this process has handed out. The kernel may give the same ephemeral port to two back-to-back
 * `listen(0)` calls once the first is closed, and a test that binds two of them on one host then fails
 * with EADDRINUSE; never handing out a port twice in one process rules that out.
 */
const handedOut = new Set<number>();

/** Asks the kernel for a free TCP port on `host`, distinct from every port handed out before in this process. Another process may take it before you bind it; retry then. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (;;) {
    const port = await kernelPort(host);
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

function kernelPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
