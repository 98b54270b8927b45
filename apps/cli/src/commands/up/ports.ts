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

/**
 * A free port on 127.0.0.1 for a service of the local stack (nats-server, the engine-sims), chosen below the
 * kernel's ephemeral range (32768–60999 on Linux). Every `listen(0)` and every outgoing connection on the machine
 * takes its port from that range, so a port found free there can be taken before the child process binds it (a
 * busy machine, tests running `triad up` next to other servers); below it only a deliberate bind can.
 */
export async function freeLoopbackPort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    try {
      await tryBind('127.0.0.1', port);
      return port;
    } catch {
      // taken (or refused): another one
    }
  }
  throw new StartupError('no free port on 127.0.0.1 in 20000–32767 after 200 tries');
}
