import { mkdirSync } from 'node:fs';
import { JetStreamApi, deleteStream, listStreams } from './jetstream-api';
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

/** Where `--nats auto` looks for a server already running: nats-server's default address. */
export const LOCAL_NATS: NatsAddress = { host: '127.0.0.1', port: 4222 };

export interface NatsAddress {
  readonly host: string;
  readonly port: number;
}

/** A NATS server for the stack; `release` removes what the stack created on a server it did not start. */
export interface ResolvedNats {
  readonly endpoint: NatsEndpoint;
  readonly note?: string;
  readonly release?: () => Promise<void>;
}

/** Streams of Triad's KV buckets (a bucket `b` is the stream `KV_b`; every Triad bucket is `triad_*`). */
const TRIAD_STREAM = /^KV_triad_/;
const API_TIMEOUT_MS = 2000;

/** The Triad buckets a server holds, or why it would not say. */
async function triadBuckets(at: NatsAddress): Promise<{ buckets: string[] } | { error: string }> {
  let api: JetStreamApi | undefined;
  try {
    api = await JetStreamApi.open(at.host, at.port, API_TIMEOUT_MS);
    const streams = await listStreams(api, API_TIMEOUT_MS);
    return { buckets: streams.filter((s) => TRIAD_STREAM.test(s)).map((s) => s.slice('KV_'.length)) };
  } catch (err) {
    return { error: (err as Error).message };
  } finally {
    api?.close();
  }
}

/** Deletes every Triad bucket on the server (those a reused server got from this stack: it held none before). */
async function removeTriadBuckets(at: NatsAddress): Promise<void> {
  const api = await JetStreamApi.open(at.host, at.port, API_TIMEOUT_MS);
  try {
    for (const stream of (await listStreams(api, API_TIMEOUT_MS)).filter((s) => TRIAD_STREAM.test(s))) {
      await deleteStream(api, stream, API_TIMEOUT_MS);
    }
  } finally {
    api.close();
  }
}

const listed = (names: readonly string[]) =>
  names.length <= 3 ? names.join(', ') : `${names.slice(0, 3).join(', ')} and ${names.length - 3} more`;

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
 * Finds or starts the NATS server: an explicit URL must answer with JetStream (its Triad buckets are used as they
 * are: the user asked for that server); `spawn` starts a private one. `auto` reuses a JetStream server on
 * `local` (127.0.0.1:4222) only when it holds no Triad bucket, says so, and hands back a `release` that removes
 * the buckets the stack created there; a server with Triad buckets (another stack's, or left by a run that was
 * killed) is never written into unasked: a private server is started instead, with a note saying why.
 */
export async function resolveNats(
  choice: NatsChoice,
  supervisor: Supervisor,
  storeDir: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  local: NatsAddress = LOCAL_NATS,
): Promise<ResolvedNats> {
  if (choice.kind === 'url') return { endpoint: await useGiven(choice.url) };
  const start = () => startPrivate(supervisor, storeDir, env, timeoutMs);
  if (choice.kind === 'spawn') return { endpoint: await start() };
  const where = `${local.host}:${local.port}`;
  const url = `nats://${where}`;
  const probe = await probeNats(local.host, local.port, 500);
  if (!probe.reachable) return { endpoint: await start() };
  if (!probe.jetstream)
    return { endpoint: await start(), note: `the NATS server on ${where} has no JetStream, so triad up started its own` };
  const held = await triadBuckets(local);
  if ('error' in held) {
    return {
      endpoint: await start(),
      note: `the NATS server on ${where} would not list its streams (${held.error}), so triad up started its own; --nats ${url} uses it anyway`,
    };
  }
  if (held.buckets.length > 0) {
    return {
      endpoint: await start(),
      note:
        `the NATS server on ${where} already holds Triad buckets (${listed(held.buckets)}: another stack's, or left by ` +
        `a run that was killed), so triad up started its own rather than write into them; --nats ${url} shares that ` +
        `server on purpose`,
    };
  }
  const version = 'version' in probe && probe.version ? ` (nats-server ${probe.version})` : '';
  return {
    endpoint: { url, origin: 'local' },
    note:
      `reusing the NATS server already running on ${where}${version}: Triad's buckets are created there and removed ` +
      `when triad up stops; --nats spawn starts a private server instead`,
    release: () => removeTriadBuckets(local),
  };
}
