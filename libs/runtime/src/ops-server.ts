import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { registerUnexpectedErrorMetrics } from './process-guard';

export interface OpsServerOptions {
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** Prometheus registry served on `/metrics`. */
  readonly registry?: Registry;
  /** `/readyz` answers 200 when this returns true, else 503 with the reason. */
  readonly readiness: () => { ready: boolean; reason?: string };
  /** `/healthz` answers 200 unless this returns false. */
  readonly liveness?: () => boolean;
  /** Extra read-only JSON routes (e.g. `/debug/...`): path → the value to serve. */
  readonly routes?: Readonly<Record<string, () => unknown>>;
}

export interface OpsServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * The operational HTTP surface every long-running Triad process has: `/healthz`, `/readyz` and `/metrics`, plus any
 * read-only JSON routes the process adds.
 * It is a separate listener from any data-plane port so probes and scrapes never queue behind traffic.
 */
export async function startOpsServer(options: OpsServerOptions): Promise<OpsServer> {
  // Every service counts what its process guard caught (guardProcess), under the same name.
  if (options.registry) registerUnexpectedErrorMetrics(options.registry);
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      const ok = options.liveness ? options.liveness() : true;
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok' : 'unhealthy');
      return;
    }
    if (path === '/readyz') {
      const r = options.readiness();
      res.writeHead(r.ready ? 200 : 503, { 'content-type': 'text/plain' }).end(r.ready ? 'ready' : `not ready: ${r.reason ?? 'starting'}`);
      return;
    }
    if (path === '/metrics' && options.registry) {
      const registry = options.registry;
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(err.message),
      );
      return;
    }
    const route = path === undefined ? undefined : options.routes?.[path];
    if (route) {
      try {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(route()));
      } catch (err) {
        res.writeHead(500, { 'content-type': 'text/plain' }).end((err as Error).message);
      }
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
