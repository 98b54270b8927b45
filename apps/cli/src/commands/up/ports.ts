import { createServer } from 'node:net';
import { StartupError } from './startup-error';

/** Binds `host:port` for a moment; resolves when the bind works, else rejects with the errno error. */
function tryBind(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()));
  });
}

/**
 * Checks before anything starts that a service will be able to listen on `host:port`, so the user reads
 * "port 8080 is already in use" instead of a stack trace from a child process.
 */
export async function assertPortFree(host: string, port: number, what: string): Promise<void> {
  try {
    await tryBind(host, port);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const where = host === '0.0.0.0' ? `port ${port}` : `${host}:${port}`;
    if (code === 'EADDRINUSE') {
      throw new StartupError(
        `${where} is already in use, so ${what} cannot listen on it. Stop the process that holds it ` +
          `(\`ss -ltnp 'sport = :${port}'\` or \`lsof -i :${port}\` shows it) or choose another port.`,
      );
    }
    if (code === 'EADDRNOTAVAIL') {
      throw new StartupError(
        `${host} is not an address of this machine, so ${what} cannot listen on it. Linux routes all of ` +
          `127.0.0.0/8 to the loopback interface; on macOS add the alias first: sudo ifconfig lo0 alias ${host} up`,
      );
    }
    if (code === 'EACCES') {
      throw new StartupError(`${where} needs privileges to listen on (${what}); choose a port above 1023.`);
    }
    throw new StartupError(`cannot listen on ${where} for ${what}: ${(err as Error).message}`);
  }
}

/** Asks the kernel for a free port on 127.0.0.1 (another process may take it before it is used: rare on a dev box). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
