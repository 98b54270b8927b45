import { mkdirSync } from 'node:fs';
import { describeExit } from './managed-child';
import { natsHostPort, probeNats } from './nats-probe';
import type { NatsChoice } from './options';
import { freeLoopbackPort } from './ports';
import { StartupError } from './startup-error';
import type { Supervisor } from './supervisor';

/** The NATS server the stack uses, and where it came from (for the ready message). */
export interface NatsEndpoint {
  readonly url: string;
  readonly origin: 'given' | 'local' | 'started';
}

const LOCAL_NATS_URL = 'nats://127.0.0.1:4222';

export const NATS_INSTALL_HELP = [
  'nats-server is not installed (it is not on PATH), and no NATS server with JetStream answers on 127.0.0.1:4222.',
  'Install it, then run again:',
  '  Debian/Ubuntu:  sudo apt-get install nats-server',
  '  macOS:          brew install nats-server',
  '  any OS:         go install github.com/nats-io/nats-server/v2@latest  (or a release binary from ' +
    'github.com/nats-io/nats-server/releases)',
  'Or point Triad at a running server with JetStream: TRIAD_NATS_URL=nats://host:4222 npm start  (start one with `nats-server -js`)',
].join('\n');

const binary = (env: NodeJS.ProcessEnv): string => env['NATS_SERVER_BIN'] ?? 'nats-server';

async function useGiven(url: string): Promise<NatsEndpoint> {
  const { host, port } = natsHostPort(url);
  const probe = await probeNats(host, port);
  if (!probe.reachable) {
    throw new StartupError(
      `no NATS server answers at ${url} (from --nats or TRIAD_NATS_URL). Start one (nats-server -js) or unset ` +
        `TRIAD_NATS_URL to let triad up start its own.`,
    );
  }
  if (!probe.jetstream) {
    throw new StartupError(
      `the NATS server at ${url} has JetStream disabled; Triad keeps its state in JetStream KV. Restart it with -js ` +
        `(nats-server -js).`,
    );
  }
  return { url, origin: 'given' };
}

/** Starts a private nats-server with JetStream on a free port and a store in `storeDir`; waits until it answers. */
async function startPrivate(supervisor: Supervisor, storeDir: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<NatsEndpoint> {
  mkdirSync(storeDir, { recursive: true });
  const port = await freeLoopbackPort();
  // nats-server's 25-line start-up banner would bury the services' lines; only its warnings and errors are shown.
  const child = supervisor.start(
    'nats',
    binary(env),
    ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir],
    env,
    (line) => !line.includes('[INF]'),
  );
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const probe = await Promise.race([child.exited, probeNats('127.0.0.1', port, 500)]);
    if ('code' in probe) {
      if (probe.error?.code === 'ENOENT') throw new StartupError(NATS_INSTALL_HELP);
      throw new StartupError(`nats-server ${describeExit(probe)} before it accepted clients:\n  ${child.lastLines().join('\n  ')}`);
    }
    if (probe.reachable && probe.jetstream) return { url: `nats://127.0.0.1:${port}`, origin: 'started' };
    if (Date.now() > deadline) throw new StartupError(`nats-server did not accept clients on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Finds or starts the NATS server: an explicit URL must answer with JetStream; `auto` reuses a JetStream server on
 * 127.0.0.1:4222 and otherwise starts a private one, as does `spawn` always.
 */
export async function resolveNats(
  choice: NatsChoice,
  supervisor: Supervisor,
  storeDir: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ endpoint: NatsEndpoint; note?: string }> {
  if (choice.kind === 'url') return { endpoint: await useGiven(choice.url) };
  if (choice.kind === 'auto') {
    const { host, port } = natsHostPort(LOCAL_NATS_URL);
    const probe = await probeNats(host, port, 500);
    if (probe.reachable && probe.jetstream) return { endpoint: { url: LOCAL_NATS_URL, origin: 'local' } };
    if (probe.reachable) {
      return {
        endpoint: await startPrivate(supervisor, storeDir, env, timeoutMs),
        note: 'the NATS server on 127.0.0.1:4222 has no JetStream, so triad up started its own',
      };
    }
  }
  return { endpoint: await startPrivate(supervisor, storeDir, env, timeoutMs) };
}
