import type { EndpointRecord, ModelRouteRecord, ModelServerRecord } from '@triad/bus';
import { resolvePipelineMode, type ModelRouteSpec, type ModelServerSpec } from '@triad/crd';
import type { SimEngineHandle } from '@triad/engine-sim';

// The KV records the pod-watcher would write, for tests that put them into NATS themselves (in-process harness and
// child-process stack alike).

export const NS = 'default';

export function modelServerRecord(name: string, spec: ModelServerSpec, extra?: Partial<ModelServerRecord>): ModelServerRecord {
  return { schemaVersion: 1, namespace: NS, name, mode: resolvePipelineMode(spec), spec, ...extra };
}

export function modelRouteRecord(name: string, spec: ModelRouteSpec, extra?: Partial<ModelRouteRecord>): ModelRouteRecord {
  return { schemaVersion: 1, namespace: NS, name, spec, ...extra };
}

/** A ready endpoint serving `sim` (idle metrics scraped now), with its bootstrap port when the sim has one. */
export function simEndpointRecord(
  server: string,
  pod: string,
  role: EndpointRecord['role'],
  sim: SimEngineHandle,
  extra?: Partial<EndpointRecord>,
): EndpointRecord {
  const now = Date.now();
  return {
    schemaVersion: 1,
    namespace: NS,
    modelServer: server,
    pod,
    role,
    ip: sim.host,
    port: sim.port,
    engine: sim.engine === 'vllm' ? 'vLLM' : 'SGLang',
    ready: true,
    models: [sim.model],
    updatedAt: now,
    metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: now, stale: false },
    ...(sim.bootstrapPort !== undefined ? { bootstrapPort: sim.bootstrapPort } : {}),
    ...extra,
  };
}
