// Engine-sims behind a gateway (lib/bench-gateway.ts) whose scheduling decisions the benchmark fixes: a stand-in
// scheduler on NATS answers each request with the pods the benchmark chose, and the records the pod-watcher would
// write are published here. Used by the benchmarks that measure one dispatch path at a time (kv-aborts,
// vllm-kv-flows), where a real scheduler's choice would blur what is measured.
import {
  Buckets,
  EndpointRecordSchema,
  ModelRouteRecordSchema,
  ModelServerRecordSchema,
  SCHEDULER_QUEUE_GROUP,
  Subjects,
  endpointKey,
  objectKey,
  type DecisionOrError,
  type EndpointRecord,
  type EndpointRef,
  type SchedulingRequest,
} from '@triad/bus';
import type { Bus } from '@triad/bus/client';
import type { KvConnector } from '@triad/crd';
import type { SimEngineHandle } from '@triad/engine-sim';

export const MODEL = 'sim-model';
const NS = 'default';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Answers the gateway's scheduling requests with `decide`; a request it has no answer for gets no candidates. */
export function serveFixedDecisions(bus: Bus, decide: (r: SchedulingRequest) => DecisionOrError | undefined): void {
  bus.nc.subscribe(Subjects.schedule, {
    queue: SCHEDULER_QUEUE_GROUP,
    callback: (_err, msg) => {
      const batch = JSON.parse(decoder.decode(msg.data)) as { requests: SchedulingRequest[] };
      const decisions = batch.requests.map(
        (r): DecisionOrError => decide(r) ?? { id: r.id, ok: false, code: 'SCHED_NO_CANDIDATES', message: 'no decision' },
      );
      msg.respond(encoder.encode(JSON.stringify({ v: 1, decisions })));
    },
  });
}

/** One pod of a PD ModelServer: its sim, role, and record fields over the defaults (bootstrap port, Mooncake flow). */
export interface PdPod {
  readonly sim: SimEngineHandle;
  readonly role: 'prefill' | 'decode';
  readonly extra?: Partial<EndpointRecord>;
}

/**
 * Publishes a PD ModelServer `name` (its own route, model name `name`) over `pods`, with the records the pod-watcher
 * would write, and returns each pod's reference for the decisions.
 */
export async function publishPdServer(
  bus: Bus,
  name: string,
  engine: 'vLLM' | 'SGLang',
  kvConnector: KvConnector | undefined,
  pods: Record<string, PdPod>,
): Promise<Record<string, EndpointRef>> {
  const servers = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
  const routes = await bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema);
  const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  await servers.put(objectKey(NS, name), {
    schemaVersion: 1,
    namespace: NS,
    name,
    mode: 'pd',
    spec: {
      model: MODEL,
      inferenceEngine: engine,
      workloadPort: { port: 8000, protocol: 'http' },
      ...(kvConnector !== undefined ? { kvConnector } : {}),
      workloadSelector: { matchLabels: { app: name }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    },
  });
  await routes.put(objectKey(NS, name), {
    schemaVersion: 1,
    namespace: NS,
    name,
    spec: { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] },
  });
  const refs: Record<string, EndpointRef> = {};
  for (const [pod, { sim, role, extra }] of Object.entries(pods)) {
    const record: EndpointRecord = {
      schemaVersion: 1,
      namespace: NS,
      modelServer: name,
      pod,
      role,
      ip: sim.host,
      port: sim.port,
      engine,
      ready: true,
      models: [MODEL],
      group: 'g1',
      updatedAt: Date.now(),
      metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: Date.now(), stale: false },
      ...extra,
    };
    await endpoints.put(endpointKey(NS, name, pod), record);
    const { mooncake } = record;
    refs[pod] = {
      key: endpointKey(NS, name, pod),
      pod,
      ip: sim.host,
      port: sim.port,
      ...(record.bootstrapPort !== undefined ? { bootstrapPort: record.bootstrapPort } : {}),
      ...(mooncake !== undefined
        ? { mooncake: { flow: mooncake.flow, ...(mooncake.engineIds ? { engineIds: mooncake.engineIds } : {}) } }
        : {}),
    };
  }
  return refs;
}

/** The sum of the metric lines of a gateway's ops port that start with `prefix`. */
export async function metricTotal(opsPort: number, prefix: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(prefix)) sum += Number(line.split(' ').pop());
  return sum;
}
