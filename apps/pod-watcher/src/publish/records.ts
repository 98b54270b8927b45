import {
  SCHEMA_VERSION,
  type EndpointRecord,
  type MooncakeBootstrap,
  type ListenerRef,
  type MetricsSnapshot,
  type ModelRouteRecord,
  type ModelServerRecord,
  type ProviderResolution,
} from '@triad/bus';
import { resolvePipelineMode, type ModelRoute, type ModelServer } from '@triad/crd';
import type { Placement } from '../topology/placement';
import type { TargetView } from '../scrape/scraper';

const NO_METRICS: MetricsSnapshot = { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: 0, stale: false };

/**
 * The endpoint record of a placement with what the scraper knows of its address (nothing yet: never scraped), as
 * written by the replica `scrapedBy` (whose scrape freshness then ages it).
 */
export function endpointRecord(p: Placement, view: TargetView | undefined, now: number, scrapedBy?: string): EndpointRecord {
  const r: EndpointRecord = {
    schemaVersion: SCHEMA_VERSION,
    namespace: p.namespace,
    modelServer: p.modelServer,
    pod: p.pod,
    role: p.role,
    ip: p.ip,
    port: p.port,
    engine: p.engine,
    // Only Ready pods are placed; a pod that stops being Ready has its record deleted.
    ready: true,
    models: [...(view?.models ?? [])],
    metrics: { ...(view?.metrics ?? NO_METRICS) },
    updatedAt: now,
  };
  if (p.group !== undefined) r.group = p.group;
  const bootstrapPort = effectiveBootstrapPort(p, view);
  if (bootstrapPort !== undefined) r.bootstrapPort = bootstrapPort;
  if (p.mooncake !== undefined) {
    // A Mooncake prefill is offered only once the flow it needs is known (and, for upstream vLLM's connector, the
    // engine ids its decodes must name): sent the wrong flow, every decode would prefill the prompt again.
    const mooncake = mooncakeOf(p, view);
    if (mooncake === undefined) r.ready = false;
    else r.mooncake = mooncake;
  }
  const dpSize = p.engine === 'SGLang' ? view?.serverInfo?.dpSize : p.dpSize;
  if (dpSize !== undefined) r.dpSize = dpSize;
  if (p.ecControlAddresses !== undefined) r.ecControlAddresses = [...p.ecControlAddresses];
  if (p.kvEvents !== undefined) r.kvEvents = { ...p.kvEvents };
  if (scrapedBy !== undefined) r.scrapedBy = scrapedBy;
  return r;
}

/**
 * Which Mooncake connector a vLLM prefill runs: the ModelServer's `kvConnector.implementation` when it names one,
 * else what the bootstrap probe found. Undefined while it cannot be routed yet: no probe answer, or upstream vLLM's
 * connector whose bootstrap server lists no engine ids (its workers have not registered).
 */
export function mooncakeOf(p: Placement, view: TargetView | undefined): MooncakeBootstrap | undefined {
  if (p.mooncake === 'vllm-ascend') return { flow: 'sequential', source: 'override' };
  const probe = view?.mooncake;
  if (probe === undefined) return undefined;
  const detail = probe.detail.slice(0, 512);
  if (probe.flow === 'concurrent' && (probe.engineIds?.length ?? 0) > 0) {
    return {
      flow: 'concurrent',
      engineIds: [...(probe.engineIds as string[])],
      source: p.mooncake === 'vllm' ? 'override' : 'probe',
      detail,
    };
  }
  if (p.mooncake === 'vllm' || probe.flow === 'concurrent') return undefined;
  return { flow: 'sequential', source: 'probe', detail };
}

/** Where the pod-watcher asks a vLLM Mooncake prefill's bootstrap server (`GET /query`); undefined: no need to ask. */
export function bootstrapQueryUrl(p: Placement): string | undefined {
  if (p.mooncake === undefined || p.mooncake === 'vllm-ascend' || p.bootstrapPort === undefined) return undefined;
  const host = p.ip.includes(':') ? `[${p.ip}]` : p.ip;
  return `http://${host}:${p.bootstrapPort}/query`;
}

/**
 * A SGLang prefill's bootstrap port: what the engine itself reports in `/server_info` (it is what it listens on),
 * else the placement's static port (annotations, ModelServer, default).
 */
export function effectiveBootstrapPort(p: Placement, view: TargetView | undefined): number | undefined {
  if (p.bootstrapPort === undefined) return undefined;
  const info = view?.serverInfo;
  return info?.disaggregationMode === 'prefill' && info.bootstrapPort !== undefined ? info.bootstrapPort : p.bootstrapPort;
}

/**
 * Whether two JSON-like values would be written as the same JSON, field order aside (members set to undefined
 * are absent, as in JSON), leaving out the top-level members `skip` and `skipToo`. Compared in place: this runs on every scrape
 * of every engine, where stringifying both records cost more than the rest of the comparison.
 */
function sameJsonExcept(a: unknown, b: unknown, skip?: string, skipToo?: string): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJsonExcept(a[i], b[i])) return false;
    return true;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let members = 0;
  for (const k in x) {
    if (k === skip || k === skipToo || x[k] === undefined) continue;
    members += 1;
    if (!sameJsonExcept(x[k], y[k])) return false;
  }
  for (const k in y) if (k !== skip && k !== skipToo && y[k] !== undefined) members -= 1;
  return members === 0;
}

/**
 * Whether `next` says nothing new compared with `published`: same fields and metric values, and a scrape time
 * less than `heartbeatMs` newer (Infinity: the scrape time alone is never news, the writer's scrape freshness
 * says it). A first scrape time is news. The write time (`updatedAt`) is not content.
 */
export function sameEndpointRecord(published: EndpointRecord, next: EndpointRecord, heartbeatMs: number): boolean {
  const stale =
    published.metrics.scrapedAt === 0 ? next.metrics.scrapedAt !== 0 : next.metrics.scrapedAt - published.metrics.scrapedAt >= heartbeatMs;
  if (stale) return false;
  return sameMetrics(published.metrics, next.metrics) && sameJsonExcept(published, next, 'metrics', 'updatedAt');
}

/** Same engine numbers and state, the scrape time aside. */
export function sameMetrics(a: MetricsSnapshot, b: MetricsSnapshot): boolean {
  return sameJsonExcept(a, b, 'scrapedAt');
}

export function modelServerRecord(ms: ModelServer): ModelServerRecord {
  const r: ModelServerRecord = {
    schemaVersion: SCHEMA_VERSION,
    namespace: ms.metadata.namespace,
    name: ms.metadata.name,
    mode: resolvePipelineMode(ms.spec),
    spec: ms.spec,
  };
  if (ms.metadata.creationTimestamp) r.creationTimestamp = ms.metadata.creationTimestamp;
  return r;
}

/** What a route record says beyond its spec: its providers resolved, its listeners (Gateway API mode). */
export interface RouteResolution {
  readonly providers?: ProviderResolution[];
  readonly listeners?: ListenerRef[];
}

export function modelRouteRecord(mr: ModelRoute, resolution: RouteResolution = {}): ModelRouteRecord {
  const r: ModelRouteRecord = { schemaVersion: SCHEMA_VERSION, namespace: mr.metadata.namespace, name: mr.metadata.name, spec: mr.spec };
  if (mr.metadata.creationTimestamp) r.creationTimestamp = mr.metadata.creationTimestamp;
  if (resolution.providers) r.providers = resolution.providers;
  if (resolution.listeners) r.listeners = resolution.listeners;
  return r;
}

/** Spec records are equal when their JSON is (they are built in a fixed field order). */
export function sameJson<T>(a: T, b: T): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
