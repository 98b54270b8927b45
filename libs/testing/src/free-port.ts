import { createServer } from 'node:net';

/**
 * Test ports come from below the kernel's ephemeral range (32768–60999 on Linux). Every `listen(0)` and every
 * outgoing connection of every process on the machine takes its port from that range, so a port found free there
 * can be taken by a parallel test worker between the check and the child process's own bind (a CI run lost a
 * scheduler child to EADDRINUSE that way). Below the range only another `freePort` caller can pick the same port.
 */
const LOWEST = 20_000;
const HIGHEST = 32_767;

/** Ports this process has handed out: never handed out twice, so two servers of one test cannot collide. */
const handedOut = new Set<number>();

/**
 * A TCP port that nothing listens on at `host` now, below the ephemeral range and distinct from every port handed
 * out before in this process. Another process may still take it before you bind it; that takes another `freePort`
 * caller picking the same one of 12,768 ports in the same moment.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST + 1));
    if (handedOut.has(port)) continue;
    if (await bindable(port, host)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`freePort: no free port in ${LOWEST}–${HIGHEST} on ${host} after 200 tries`);
}

/** Whether a server can listen on `port` at `host` (closed again at once). */
function bindable(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
}
