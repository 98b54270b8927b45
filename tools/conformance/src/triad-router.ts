import {
  Buckets,
  EndpointRecordSchema,
  ModelRouteRecordSchema,
  ModelServerRecordSchema,
  endpointKey,
  objectKey,
  type EndpointRecord,
  type ModelServerRecord,
} from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { freePort, spawnTriad, startNatsServer, waitReady, type NatsServerHandle, type TriadChild } from '@triad/testing';
import { MODEL, type Bench } from './bench';
import type { RunningRouter } from './router';

/** How a bench stage appears to Triad: its role and, for SGLang prefills, vLLM Mooncake prefills, the bootstrap port. */
export interface TriadEndpoint {
  readonly stage: string;
  readonly role: EndpointRecord['role'];
  readonly dpSize?: number;
  readonly ecControlAddresses?: readonly string[];
}

export interface TriadSpec {
  readonly mode: ModelServerRecord['mode'];
  readonly spec: ModelServerRecord['spec'];
  /** The endpoints, or a function of the bench for those that name its addresses (Mooncake EC control addresses). */
  readonly endpoints: readonly TriadEndpoint[] | ((bench: Bench) => readonly TriadEndpoint[]);
}

/**
 * What the pod-watcher's probe of a vLLM Mooncake prefill's bootstrap port publishes (docs/pod-watcher.md): the
 * concurrent flow with the engine id of each DP rank when `GET /query` answers, else the sequential flow. Asked of
 * the sim directly, so the probe is not part of the recorded traffic.
 */
async function mooncakeProbe(sim: { readonly host: string; readonly bootstrapPort?: number }): Promise<EndpointRecord['mooncake']> {
  if (sim.bootstrapPort === undefined) return { flow: 'sequential', source: 'probe', detail: 'no bootstrap server' };
  const query = (await (await fetch(`http://${sim.host}:${sim.bootstrapPort}/query`)).json()) as Record<string, { engine_id: string }>;
  const engineIds = Object.keys(query)
    .sort((a, b) => Number(a) - Number(b))
    .map((k) => query[k].engine_id);
  return { flow: 'concurrent', engineIds, source: 'probe' };
}

const NAMESPACE = 'default';
const SERVER = 'conformance';

/**
 * Triad in front of a bench: a nats-server, the records the pod-watcher would write for the bench's taps (one
 * ModelServer, a ModelRoute whose model name is the engines' own, so the body's `model` passes unchanged, and one
 * endpoint per stage at the tap's address), and `triad gateway --scheduling in-process` (the scheduler's plugins in
 * the gateway's process: the same decisions without a second process).
 */
export async function startTriad(bench: Bench, triad: TriadSpec): Promise<RunningRouter> {
  let nats: NatsServerHandle | undefined;
  let gateway: TriadChild | undefined;
  const close = async () => {
    await gateway?.stop();
    await nats?.close();
  };
  try {
    nats = await startNatsServer();
    const bus = await connectBus({ servers: nats.url, name: 'conformance' });
    const [servers, routes, endpoints] = await Promise.all([
      bus.kv(Buckets.modelServers, ModelServerRecordSchema),
      bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema),
      bus.kv(Buckets.endpoints, EndpointRecordSchema),
    ]);
    await servers.put(objectKey(NAMESPACE, SERVER), {
      schemaVersion: 1,
      namespace: NAMESPACE,
      name: SERVER,
      mode: triad.mode,
      spec: triad.spec,
    });
    await routes.put(objectKey(NAMESPACE, SERVER), {
      schemaVersion: 1,
      namespace: NAMESPACE,
      name: SERVER,
      spec: { modelName: MODEL, rules: [{ targetModels: [{ modelServerName: SERVER, weight: 100 }] }] },
    });
    const engine = triad.spec.inferenceEngine;
    const list = typeof triad.endpoints === 'function' ? triad.endpoints(bench) : triad.endpoints;
    for (const e of list) {
      const { sim, tap } = bench.stage(e.stage);
      const now = Date.now();
      const mooncake = e.role === 'prefill' && triad.spec.kvConnector?.type === 'mooncake' ? await mooncakeProbe(sim) : undefined;
      await endpoints.put(endpointKey(NAMESPACE, SERVER, e.stage.toLowerCase()), {
        schemaVersion: 1,
        namespace: NAMESPACE,
        modelServer: SERVER,
        pod: e.stage.toLowerCase(),
        role: e.role,
        ...(triad.mode === 'aggregated' ? {} : { group: 'g1' }),
        ip: tap.opts.host,
        port: sim.port,
        ...(sim.bootstrapPort !== undefined ? { bootstrapPort: sim.bootstrapPort } : {}),
        ...(e.dpSize !== undefined ? { dpSize: e.dpSize } : {}),
        ...(e.ecControlAddresses ? { ecControlAddresses: [...e.ecControlAddresses] } : {}),
        ...(mooncake !== undefined ? { mooncake } : {}),
        engine,
        ready: true,
        models: [MODEL],
        updatedAt: now,
        metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: now, stale: false },
      });
    }
    await bus.close();
    const port = await freePort();
    const ops = await freePort();
    gateway = spawnTriad(
      [
        'gateway',
        '--scheduling',
        'in-process',
        '--nats',
        nats.url,
        '--host',
        '127.0.0.1',
        '--port',
        String(port),
        '--metrics-port',
        String(ops),
      ],
      { TRIAD_LOG_LEVEL: 'warn' },
    );
    await waitReady(gateway, ops, 'triad gateway');
    const child = gateway;
    return { name: 'triad', url: `http://127.0.0.1:${port}`, log: () => child.output(), close };
  } catch (err) {
    await close();
    throw err;
  }
}
