import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port';
import { startNatsCluster, type NatsClusterHandle } from './nats-server';
import { spawnTriad, waitReady, type TriadChild } from './triad-process';

/** One Triad service of a {@link ClusterStack}, a child process. */
export interface StackService {
  readonly kind: 'gateway' | 'scheduler' | 'pod-watcher';
  readonly name: string;
  readonly opsPort: number;
  /** Gateways: the API base URL. */
  readonly url: string;
  readonly child: TriadChild;
}

export interface ClusterStackOptions {
  /** ModelServers, ModelRoutes and Pods (multi-document YAML) the pod-watchers read (`--source file:`). */
  readonly manifests: string;
  readonly gateways?: number;
  readonly schedulers?: number;
  readonly podWatchers?: number;
  /** NATS nodes (default 3); KV buckets get as many replicas. */
  readonly natsNodes?: number;
  /** Extra environment for every service. */
  readonly env?: Readonly<Record<string, string>>;
  /** Extra arguments per service kind. */
  readonly args?: Partial<Record<StackService['kind'], readonly string[]>>;
}

export interface ClusterStack {
  readonly nats: NatsClusterHandle;
  readonly services: readonly StackService[];
  readonly gateways: readonly StackService[];
  /** Writes a new manifests file (the pod-watchers reload it). */
  writeManifests(text: string): void;
  /** Stops every service, then NATS, and removes the files. */
  close(): Promise<void>;
}

/**
 * Gateways, schedulers and pod-watchers (`triad <service>` child processes) on a clustered JetStream
 * ({@link startNatsCluster}). Every service gets every seed, in a different order, and `TRIAD_KV_REPLICAS` equal
 * to the cluster size, as the production overlay does. Resolves once every service is ready.
 */
export async function startClusterStack(options: ClusterStackOptions): Promise<ClusterStack> {
  const nats = await startNatsCluster({ size: options.natsNodes ?? 3 });
  const dir = mkdtempSync(join(tmpdir(), 'triad-cluster-stack-'));
  const manifests = join(dir, 'cluster.yaml');
  writeFileSync(manifests, options.manifests);
  const services: StackService[] = [];
  const env = { TRIAD_LOG_LEVEL: 'warn', TRIAD_KV_REPLICAS: String(nats.nodes.length), ...options.env };
  const start = async (kind: StackService['kind'], index: number): Promise<StackService> => {
    // Seeds rotated per service, so the first tries differ (nats.js also shuffles them).
    const seeds = nats.urls.map((_u, i) => nats.urls[(i + index) % nats.urls.length]).join(',');
    const opsPort = await freePort();
    const port = kind === 'gateway' ? await freePort() : 0;
    const name = `${kind}-${index}`;
    const args = [kind, '--nats', seeds, '--metrics-port', String(opsPort)];
    if (kind === 'gateway') args.push('--host', '127.0.0.1', '--port', String(port), '--drain-timeout-ms', '1000');
    if (kind === 'scheduler') args.push('--instance-id', name);
    if (kind === 'pod-watcher') args.push('--source', `file:${manifests}`, '--identity', name);
    args.push(...(options.args?.[kind] ?? []));
    const child = spawnTriad(args, { ...env, TRIAD_INSTANCE_ID: name });
    return { kind, name, opsPort, url: `http://127.0.0.1:${port}`, child };
  };
  // A port freePort() found can be taken by another process before the service binds it: start again on new ports.
  const startReady = async (kind: StackService['kind'], index: number): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      const service = await start(kind, index);
      services.push(service);
      try {
        await waitReady(service.child, service.opsPort, `${service.name} ready`);
        return;
      } catch (err) {
        if (attempt >= 3 || !service.child.output().includes('EADDRINUSE')) throw err;
        services.splice(services.indexOf(service), 1);
        await service.child.stop();
      }
    }
  };
  try {
    const starting: Promise<void>[] = [];
    for (let i = 0; i < (options.podWatchers ?? 2); i++) starting.push(startReady('pod-watcher', i));
    for (let i = 0; i < (options.schedulers ?? 2); i++) starting.push(startReady('scheduler', i));
    for (let i = 0; i < (options.gateways ?? 2); i++) starting.push(startReady('gateway', i));
    const results = await Promise.allSettled(starting);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    // Started in parallel: back to the order callers index by (pod-watchers, schedulers, gateways; each by number).
    const rank = { 'pod-watcher': 0, scheduler: 1, gateway: 2 } as const;
    services.sort((a, b) => rank[a.kind] - rank[b.kind] || a.name.localeCompare(b.name, 'en', { numeric: true }));
  } catch (err) {
    await Promise.all(services.map((s) => s.child.stop()));
    await nats.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    nats,
    services,
    gateways: services.filter((s) => s.kind === 'gateway'),
    writeManifests: (text) => writeFileSync(manifests, text),
    close: async () => {
      await Promise.all(services.map((s) => s.child.stop()));
      await nats.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
