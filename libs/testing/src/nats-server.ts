import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port';

export interface NatsServerOptions {
  /** Enable JetStream (default true). */
  readonly jetstream?: boolean;
  /** Milliseconds to wait for the server to accept clients (default 10 s). */
  readonly startTimeoutMs?: number;
  /** Listen on this port (e.g. one a service was already told to connect to); default a free one. */
  readonly port?: number;
}

/** A nats-server child process on a random loopback port with a throw-away JetStream store. */
export interface NatsServerHandle {
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  /** Stops the process (keeping the store so `start()` can resume with the same data). */
  stop(): Promise<void>;
  /** Starts it again on the same port and store (after `stop()`), e.g. to test reconnects. */
  start(): Promise<void>;
  /** Stops it and removes the store. */
  close(): Promise<void>;
}

const binary = (): string => process.env['NATS_SERVER_BIN'] ?? 'nats-server';

/** Resolves once the server sends its INFO line with JetStream enabled (when asked for). */
function probe(port: number, jetstream: boolean): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = tcpConnect({ host: '127.0.0.1', port });
    let buf = '';
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.on('error', () => done(false));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\n')) done(buf.startsWith('INFO') && (!jetstream || buf.includes('"jetstream":true')));
    });
  });
}

async function launch(port: number, storeDir: string, jetstream: boolean, timeoutMs: number): Promise<ChildProcess> {
  const args = ['-a', '127.0.0.1', '-p', String(port), ...(jetstream ? ['-js', '-sd', storeDir] : [])];
  const child = spawn(binary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<Error>((resolve) => {
    child.once('error', (err: NodeJS.ErrnoException) => {
      resolve(err.code === 'ENOENT'
        ? new Error(`nats-server binary '${binary()}' not found: install nats-server (apt-get install nats-server) or set NATS_SERVER_BIN`)
        : err);
    });
    child.once('exit', (code) => resolve(new Error(`nats-server exited with ${code} before accepting clients: ${stderr.trim()}`)));
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await Promise.race([exited, probe(port, jetstream)]);
    if (result instanceof Error) throw result;
    if (result) return child;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`nats-server on port ${port} did not accept clients within ${timeoutMs} ms: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/**
 * Starts `nats-server` from PATH (or `NATS_SERVER_BIN`) with JetStream on a random loopback port and a fresh
 * temp store, and waits until it accepts clients. Tests never share the machine's 127.0.0.1:4222 server.
 */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServerHandle> {
  const jetstream = options.jetstream ?? true;
  const timeoutMs = options.startTimeoutMs ?? 10_000;
  const storeDir = mkdtempSync(join(tmpdir(), 'triad-nats-'));
  let child: ChildProcess | undefined;
  let port = 0;
  for (let attempt = 0; ; attempt++) {
    port = options.port ?? (await freePort());
    try {
      child = await launch(port, storeDir, jetstream, timeoutMs);
      break;
    } catch (err) {
      // Another process may have taken the port between probing and binding; try another few times.
      if (attempt >= 3 || options.port !== undefined || (err as Error).message.includes('not found')) {
        rmSync(storeDir, { recursive: true, force: true });
        throw err;
      }
    }
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    stop: async () => {
      await stopChild(child);
      child = undefined;
    },
    start: async () => {
      if (child) return;
      child = await launch(port, storeDir, jetstream, timeoutMs);
    },
    close: async () => {
      await stopChild(child);
      child = undefined;
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
