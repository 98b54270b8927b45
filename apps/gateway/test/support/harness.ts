import { PassThrough } from 'node:stream';
import { isDeepStrictEqual } from 'node:util';
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
  type ModelRouteRecord,
  type ModelServerRecord,
  type SchedulingRequest,
} from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import type { ModelRouteSpec, ModelServerSpec } from '@triad/crd';
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';
import { createLogger } from '@triad/runtime';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import type { Subscription } from '@nats-io/transport-node';
import { resolveConfig, type GatewayConfig } from '../../src/config';
import { startGateway, type GatewayHandle } from '../../src/gateway';
import type { RequestHooks } from '@triad/request';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A scheduler stand-in: answers `triad.v1.schedule` batches with whatever `decide` returns per request. */
export type Decide = (request: SchedulingRequest) => DecisionOrError;

export interface Harness {
  readonly nats: NatsServerHandle;
  readonly bus: Bus;
  gateway: GatewayHandle;
  /** Access-log and service log lines the gateway wrote. */
  readonly logLines: Record<string, unknown>[];
  /** Scheduling requests the stand-in scheduler received, in order (one inner array per NATS message). */
  readonly batches: SchedulingRequest[][];
  decide: Decide;
  readonly sims: SimEngineHandle[];
  startSim(opts: SimEngineOptions): Promise<SimEngineHandle>;
  putServer(name: string, spec: ModelServerSpec, extra?: Partial<ModelServerRecord>): Promise<void>;
  putRoute(name: string, spec: ModelRouteSpec, extra?: Partial<ModelRouteRecord>): Promise<void>;
  putEndpoint(
    server: string,
    pod: string,
    role: EndpointRecord['role'],
    sim: SimEngineHandle,
    extra?: Partial<EndpointRecord>,
  ): Promise<EndpointRef>;
  /**
   * Waits until the gateway's KV view shows `model` in /v1/models and holds every endpoint record written so far
   * (the model is listed once one of its endpoints is known; the others may still be on their way).
   */
  waitForModel(model: string): Promise<void>;
  /** Waits until the gateway's KV view holds the last record `putEndpoint` wrote under every key. */
  waitForEndpoints(): Promise<void>;
  /** Stops answering scheduling requests (the scheduler is "down"). */
  stopScheduler(): Promise<void>;
  startScheduler(): void;
  close(): Promise<void>;
}

import { NS, modelRouteRecord, modelServerRecord, simEndpointRecord } from './records';

export { NS };

export function ref(server: string, pod: string, sim: SimEngineHandle, bootstrapPort?: number): EndpointRef {
  const r: EndpointRef = { key: endpointKey(NS, server, pod), pod, ip: sim.host, port: sim.port };
  if (bootstrapPort !== undefined) r.bootstrapPort = bootstrapPort;
  return r;
}

/** Starts nats-server, a stand-in scheduler and a gateway wired to them; sims are started per test. */
export async function startHarness(
  opts: {
    config?: Partial<Record<keyof GatewayConfig, unknown>>;
    hooks?: RequestHooks[];
    tracing?: boolean;
  } = {},
): Promise<Harness> {
  const nats = await startNatsServer();
  const bus = await connectBus({ servers: nats.url, name: 'gateway-test' });
  const [servers, routes, endpoints] = await Promise.all([
    bus.kv(Buckets.modelServers, ModelServerRecordSchema),
    bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema),
    bus.kv(Buckets.endpoints, EndpointRecordSchema),
  ]);
  const logLines: Record<string, unknown>[] = [];
  const logStream = new PassThrough();
  let buffered = '';
  logStream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let nl = buffered.indexOf('\n');
    while (nl >= 0) {
      logLines.push(JSON.parse(buffered.slice(0, nl)) as Record<string, unknown>);
      buffered = buffered.slice(nl + 1);
      nl = buffered.indexOf('\n');
    }
  });
  const batches: SchedulingRequest[][] = [];
  const sims: SimEngineHandle[] = [];
  let subscription: Subscription | undefined;
  // The last record written per endpoint key, as the gateway's watch will hold it: through JSON, then the schema.
  const written = new Map<string, EndpointRecord>();
  const h: Harness = {
    nats,
    bus,
    gateway: undefined as unknown as GatewayHandle,
    logLines,
    batches,
    decide: (r) => ({ id: r.id, ok: false, code: 'SCHED_NO_CANDIDATES', message: 'no decider set' }),
    sims,
    async startSim(o) {
      const sim = await startSimEngine({ admin: true, latencyProfile: 'zero', ...o });
      sims.push(sim);
      return sim;
    },
    async putServer(name, spec, extra) {
      await servers.put(objectKey(NS, name), modelServerRecord(name, spec, extra));
    },
    async putRoute(name, spec, extra) {
      await routes.put(objectKey(NS, name), modelRouteRecord(name, spec, extra));
    },
    async putEndpoint(server, pod, role, sim, extra) {
      const record = simEndpointRecord(server, pod, role, sim, extra);
      const key = endpointKey(NS, server, pod);
      await endpoints.put(key, record);
      written.set(key, EndpointRecordSchema.parse(JSON.parse(JSON.stringify(record))));
      return ref(server, pod, sim, record.bootstrapPort);
    },
    async waitForModel(model) {
      await waitFor(
        async () => {
          const res = await fetch(`${h.gateway.url}/v1/models`);
          const body = (await res.json()) as { data: { id: string }[] };
          return body.data.some((m) => m.id === model);
        },
        { what: `model ${model} in /v1/models` },
      );
      await h.waitForEndpoints();
    },
    async waitForEndpoints() {
      await waitFor(() => [...written].every(([key, record]) => isDeepStrictEqual(h.gateway.endpointRecord(key), record)), {
        what: `the gateway's view of ${[...written.keys()].join(', ')}`,
      });
    },
    async stopScheduler() {
      subscription?.unsubscribe();
      subscription = undefined;
      // Make sure the server dropped the subscription before the test sends anything.
      await bus.nc.flush();
    },
    startScheduler() {
      subscription = bus.nc.subscribe(Subjects.schedule, {
        queue: SCHEDULER_QUEUE_GROUP,
        callback: (_err, msg) => {
          const batch = JSON.parse(decoder.decode(msg.data)) as { requests: SchedulingRequest[] };
          batches.push(batch.requests);
          msg.respond(encoder.encode(JSON.stringify({ v: 1, decisions: batch.requests.map((r) => h.decide(r)) })));
        },
      });
    },
    async close() {
      await h.gateway?.close();
      await Promise.all(sims.map((s) => s.close()));
      await h.stopScheduler();
      await bus.close();
      await nats.close();
    },
  };
  h.startScheduler();
  // A scheduling budget no loaded test machine overruns: the stand-in's decisions are what the tests assert, and a
  // miss would let the gateway's local fallback decide instead (tests of the fallback set their own budget).
  const config = resolveConfig(
    {
      nats: nats.url,
      host: '127.0.0.1',
      port: 0,
      metricsPort: 0,
      drainTimeoutMs: 2000,
      scheduleBudgetMs: 2000,
      ...opts.config,
    },
    {},
  );
  h.gateway = await startGateway({
    config,
    logger: createLogger({ service: 'gateway', destination: logStream, level: 'info' }),
    ...(opts.hooks ? { hooks: opts.hooks } : {}),
    tracing: opts.tracing === true,
  });
  return h;
}

/** Access-log lines only. */
export function accessLines(h: Harness): Record<string, unknown>[] {
  return h.logLines.filter((l) => l['kind'] === 'access');
}

/** Requests a sim received on inference paths (health and metrics scrapes left out). */
export function inferenceRequests(sim: SimEngineHandle): ReturnType<SimEngineHandle['requests']> {
  return sim.requests().filter((r) => r.method === 'POST' && (r.path.startsWith('/v1/') || r.path === '/generate' || r.path === '/encode'));
}

/** A fixed decision per ModelServer name: its mode and ordered attempts (no encoders). */
export interface FixedDecision {
  readonly mode: 'aggregated' | 'pd';
  readonly attempts: { readonly endpoint: EndpointRef; readonly prefill?: EndpointRef }[];
}

/** A stand-in scheduler answering each request with its server's fixed decision, and no candidates for any other. */
export function decideByServer(decisions: ReadonlyMap<string, FixedDecision>): Decide {
  return (r) => {
    const d = decisions.get(r.modelServer);
    if (d === undefined) return { id: r.id, ok: false, code: 'SCHED_NO_CANDIDATES', message: 'unknown server' };
    return { id: r.id, ok: true, mode: d.mode, encoders: [], attempts: d.attempts };
  };
}

/** Clears every sim's fault and request log (between tests that share sims). */
export function resetSims(h: Harness): void {
  for (const s of h.sims) {
    s.setFault({ mode: 'ok' });
    s.clearRequests();
  }
}

/** The `data:` payloads of an SSE body, `[DONE]` included. */
export function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice('data: '.length));
}
