import {
  Buckets,
  EndpointRecordSchema,
  ModelRouteRecordSchema,
  ModelServerRecordSchema,
  endpointKey,
  objectKey,
  type EndpointRecord,
  type ModelRouteRecord,
} from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import type { ModelRouteSpec, ModelServerSpec } from '@triad/crd';
import type { SimEngineHandle } from '@triad/engine-sim';
import { freePort, spawnTriad, waitFor, waitReady, type TriadChild } from '@triad/testing';

// The services as child processes (`node apps/cli/bin/triad.js gateway|scheduler ...`), for tests that need the
// real binaries: their environment (OTEL_*), their stdout (access log), several gateway replicas, SIGTERM.
// Engine-sims and nats-server stay in the test process, as in support/harness.ts.

import { NS, modelRouteRecord, modelServerRecord, simEndpointRecord } from './records';

export { NS };

/** Writes the records the pod-watcher would (ModelServers, ModelRoutes, endpoints) into one nats-server's KV. */
export interface KvWriter {
  readonly bus: Bus;
  putServer(name: string, spec: ModelServerSpec): Promise<void>;
  putRoute(name: string, spec: ModelRouteSpec, extra?: Partial<ModelRouteRecord>): Promise<void>;
  putEndpoint(
    server: string,
    pod: string,
    role: EndpointRecord['role'],
    sim: SimEngineHandle,
    extra?: Partial<EndpointRecord>,
  ): Promise<void>;
  close(): Promise<void>;
}

export async function kvWriter(natsUrl: string): Promise<KvWriter> {
  const bus = await connectBus({ servers: natsUrl, name: 'gateway-child-test' });
  const [servers, routes, endpoints] = await Promise.all([
    bus.kv(Buckets.modelServers, ModelServerRecordSchema),
    bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema),
    bus.kv(Buckets.endpoints, EndpointRecordSchema),
  ]);
  return {
    bus,
    async putServer(name, spec) {
      await servers.put(objectKey(NS, name), modelServerRecord(name, spec));
    },
    async putRoute(name, spec, extra) {
      await routes.put(objectKey(NS, name), modelRouteRecord(name, spec, extra));
    },
    async putEndpoint(server, pod, role, sim, extra) {
      await endpoints.put(endpointKey(NS, server, pod), simEndpointRecord(server, pod, role, sim, extra));
    },
    close: () => bus.close(),
  };
}

/** A `triad gateway` child process. */
export interface GatewayChild {
  readonly url: string;
  readonly opsPort: number;
  readonly child: TriadChild;
  /** Every JSON line it wrote to stdout so far (service log and access log). */
  lines(): Record<string, unknown>[];
  /** Access-log lines only. */
  accessLines(): Record<string, unknown>[];
  /** The access-log line of a request id, once written. */
  accessLine(requestId: string): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** Collects the JSON lines a child writes to stdout (its own buffer, not the 20 kB tail `output()` keeps). */
function jsonLines(child: TriadChild): () => Record<string, unknown>[] {
  const lines: Record<string, unknown>[] = [];
  let buffered = '';
  child.process.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let nl = buffered.indexOf('\n');
    while (nl >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      nl = buffered.indexOf('\n');
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not a log line
      }
    }
  });
  return () => lines;
}

/**
 * Spawns `triad gateway` on free ports with `env` added (OTEL_*, TRIAD_*) and waits for `/readyz` (KV replayed,
 * API port listening). `args` adds flags (e.g. `--admission-config FILE`).
 */
export async function startGatewayChild(natsUrl: string, env: Record<string, string>, args: readonly string[] = []): Promise<GatewayChild> {
  const [port, opsPort] = [await freePort(), await freePort()];
  const child = spawnTriad(
    [
      'gateway',
      '--nats',
      natsUrl,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--metrics-port',
      String(opsPort),
      '--drain-timeout-ms',
      '2000',
      ...args,
    ],
    { TRIAD_LOG_LEVEL: 'info', ...env },
  );
  const lines = jsonLines(child);
  const accessLines = () => lines().filter((l) => l['kind'] === 'access');
  try {
    await waitReady(child, opsPort, `triad gateway on :${port} ready`);
  } catch (err) {
    await child.stop();
    throw err;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    opsPort,
    child,
    lines,
    accessLines,
    accessLine: (requestId) =>
      waitFor(() => accessLines().find((l) => l['request_id'] === requestId), { what: `access line of ${requestId}` }),
    stop: () => child.stop(),
  };
}

/** Spawns `triad scheduler` with `env` added and waits for `/readyz`. */
export async function startSchedulerChild(natsUrl: string, env: Record<string, string>): Promise<TriadChild> {
  const opsPort = await freePort();
  const child = spawnTriad(['scheduler', '--nats', natsUrl, '--metrics-port', String(opsPort)], { TRIAD_LOG_LEVEL: 'warn', ...env });
  try {
    await waitReady(child, opsPort, 'triad scheduler ready');
  } catch (err) {
    await child.stop();
    throw err;
  }
  return child;
}

/** POSTs a JSON body to the gateway; the answer body is read to the end. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: string; ms: number }> {
  const started = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text, ms: performance.now() - started };
}
