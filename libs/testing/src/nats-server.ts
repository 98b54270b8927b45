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
  /** The server process's id while it runs (benchmarks read its CPU time from /proc). */
  readonly pid: number | undefined;
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

async function launch(
  port: number,
  storeDir: string,
  jetstream: boolean,
  timeoutMs: number,
  extraArgs: readonly string[] = [],
): Promise<ChildProcess> {
  const args = ['-a', '127.0.0.1', '-p', String(port), ...(jetstream ? ['-js', '-sd', storeDir] : []), ...extraArgs];
  const child = spawn(binary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<Error>((resolve) => {
    child.once('error', (err: NodeJS.ErrnoException) => {
      resolve(
        err.code === 'ENOENT'
          ? new Error(
              `nats-server binary '${binary()}' not found: install nats-server (apt-get install nats-server) or set NATS_SERVER_BIN`,
            )
          : err,
      );
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
    get pid() {
      return child?.pid;
    },
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

/** One node of a {@link startNatsCluster} cluster. */
export interface NatsClusterNode {
  readonly name: string;
  readonly url: string;
  readonly port: number;
  /** HTTP monitoring port (`/jsz`, `/connz`, `/healthz`). */
  readonly monitorPort: number;
  readonly storeDir: string;
  /** Whether the process is running. */
  readonly running: boolean;
  /** Kills the process with SIGKILL (a crash: no lame-duck, no goodbye to the routes); the store stays. */
  kill(): Promise<void>;
  /** Stops it with SIGTERM (the store stays). */
  stop(): Promise<void>;
  /** Starts it again on the same ports and store; resolves once it accepts clients (it then catches up). */
  start(): Promise<void>;
}

/** A JetStream cluster of nats-server processes routed to each other on loopback. */
export interface NatsClusterHandle {
  readonly nodes: readonly NatsClusterNode[];
  /** Every node's client URL. */
  readonly urls: readonly string[];
  /** The seed list a client is given: every node, comma-separated. */
  readonly url: string;
  /** Resolves once the JetStream meta group has a leader and `expectPeers` nodes are current (default: all running). */
  waitForJetStream(options?: { timeoutMs?: number; expectPeers?: number }): Promise<void>;
  /** Stops every node and removes the stores. */
  close(): Promise<void>;
}

export interface NatsClusterOptions {
  /** Nodes (default 3: a JetStream cluster needs a majority, so 3 survive one loss). */
  readonly size?: number;
  /** Milliseconds to wait for each node and the meta leader (default 20 s). */
  readonly startTimeoutMs?: number;
}

interface JszReply {
  readonly meta_cluster?: {
    readonly leader?: string;
    readonly replicas?: readonly { readonly current?: boolean; readonly offline?: boolean }[];
  };
}

/**
 * Starts `size` nats-server processes (2.9+) with JetStream, clustered over routes on loopback: random client,
 * route and monitoring ports, a throw-away store per node. Resolves once the JetStream meta group has a leader
 * and every node is current, so KV buckets with `replicas: size` can be created at once.
 */
export async function startNatsCluster(options: NatsClusterOptions = {}): Promise<NatsClusterHandle> {
  const size = options.size ?? 3;
  const timeoutMs = options.startTimeoutMs ?? 20_000;
  const clusterName = `triad-test-${process.pid}`;
  const ports: { client: number; route: number; monitor: number }[] = [];
  for (let i = 0; i < size; i++) ports.push({ client: await freePort(), route: await freePort(), monitor: await freePort() });
  const routes = ports.map((p) => `nats-route://127.0.0.1:${p.route}`).join(',');
  const children: (ChildProcess | undefined)[] = new Array<ChildProcess | undefined>(size).fill(undefined);
  const stores = ports.map(() => mkdtempSync(join(tmpdir(), 'triad-nats-cluster-')));
  const argsOf = (i: number): string[] => {
    const p = ports[i];
    return [
      '-n',
      `n${i}`,
      '-m',
      String(p.monitor),
      '--cluster_name',
      clusterName,
      '--cluster',
      `nats://127.0.0.1:${p.route}`,
      '--routes',
      routes,
    ];
  };
  const startNode = async (i: number): Promise<void> => {
    if (children[i] !== undefined) return;
    children[i] = await launch((ports[i] as { client: number }).client, stores[i], true, timeoutMs, argsOf(i));
  };
  const nodes: NatsClusterNode[] = ports.map((p, i) => ({
    name: `n${i}`,
    url: `nats://127.0.0.1:${p.client}`,
    port: p.client,
    monitorPort: p.monitor,
    storeDir: stores[i],
    get running() {
      return children[i] !== undefined;
    },
    kill: async () => {
      const child = children[i];
      children[i] = undefined;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      });
    },
    stop: async () => {
      await stopChild(children[i]);
      children[i] = undefined;
    },
    start: () => startNode(i),
  }));
  const closeAll = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.stop()));
    for (const dir of stores) rmSync(dir, { recursive: true, force: true });
  };
  const waitForJetStream = async (o: { timeoutMs?: number; expectPeers?: number } = {}): Promise<void> => {
    const deadline = Date.now() + (o.timeoutMs ?? timeoutMs);
    const expected = o.expectPeers ?? nodes.filter((n) => n.running).length;
    let last = 'no answer yet';
    for (;;) {
      const running = ports.filter((_p, i) => children[i] !== undefined);
      for (const p of running) {
        try {
          const res = await fetch(`http://127.0.0.1:${p.monitor}/jsz`);
          const jsz = (await res.json()) as JszReply;
          const meta = jsz.meta_cluster;
          // The leader counts itself; `replicas` lists the other peers with whether they are current.
          const current = 1 + (meta?.replicas ?? []).filter((r) => r.current === true && r.offline !== true).length;
          if (meta?.leader && current >= expected) return;
          last = `leader ${meta?.leader ?? 'none'}, ${current} current of ${expected}`;
        } catch (err) {
          last = (err as Error).message;
        }
      }
      if (Date.now() > deadline) throw new Error(`NATS cluster JetStream not ready within ${o.timeoutMs ?? timeoutMs} ms: ${last}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  try {
    // All at once: each node waits for its routes, and JetStream needs a quorum before the meta leader exists.
    await Promise.all(nodes.map((_n, i) => startNode(i)));
    await waitForJetStream();
  } catch (err) {
    await closeAll();
    throw err;
  }
  return {
    nodes,
    urls: nodes.map((n) => n.url),
    url: nodes.map((n) => n.url).join(','),
    waitForJetStream,
    close: closeAll,
  };
}
