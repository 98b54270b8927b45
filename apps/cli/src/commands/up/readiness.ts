import { get } from 'node:http';
import { describeExit, type ManagedChild } from './managed-child';
import { StartupError } from './startup-error';

const POLL_MS = 100;

/**
 * One GET with a short timeout; resolves to the status and body, or undefined when nothing answered. Plain
 * node:http rather than fetch, which refuses the ports on the Fetch standard's "bad ports" list (22, 25, ...).
 */
export function httpGet(url: string, timeoutMs = 1000): Promise<{ status: number; body: string } | undefined> {
  return new Promise((resolve) => {
    const req = get(url, { timeout: timeoutMs, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

function exitedError(child: ManagedChild, why: string): StartupError {
  const tail = child.lastLines();
  const lines = tail.length > 0 ? `; its last lines:\n  ${tail.join('\n  ')}` : '';
  return new StartupError(`${child.name} ${why} before it was ready${lines}`);
}

/**
 * Polls a service's `/readyz` until it answers 200. Fails at once when the process exits, and at the deadline
 * with the last reason the service gave (its 503 body).
 */
export async function waitUntilReady(child: ManagedChild, readyzUrl: string, deadline: number): Promise<void> {
  let lastReason = 'no answer yet';
  let exited = false;
  void child.exited.then(() => {
    exited = true;
  });
  for (;;) {
    if (exited) throw exitedError(child, describeExit(await child.exited));
    const res = await httpGet(readyzUrl);
    if (res?.status === 200) return;
    if (res) lastReason = `${res.status} ${res.body.trim().slice(0, 200)}`;
    if (Date.now() > deadline) {
      throw new StartupError(
        `${child.name} was not ready after the ready timeout (${readyzUrl} said: ${lastReason}); raise it with ` + `--ready-timeout`,
      );
    }
    await Promise.race([new Promise((r) => setTimeout(r, POLL_MS)), child.exited]);
  }
}
