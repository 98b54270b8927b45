// Builders for tests of the scheduling lib and of its users (scheduler app, gateway fallback). Not for production.
import {
  EndpointRecordSchema,
  ModelServerRecordSchema,
  SchedulingRequestSchema,
  endpointKey,
  type EndpointRecord,
  type ModelServerRecord,
  type SchedulingRequest,
  type SchedulingRequestInput,
} from '@triad/bus';
import type { PipelineMode } from '@triad/crd';
import type { Candidates } from '../framework/candidates';
import type { CycleContext, Filter, Scorer } from '../framework/plugin';
import { CandidateSet } from '../planning/candidate-set';
import { Cycle } from '../planning/cycle';
import { EndpointIndex } from '../state/endpoint-index';
import { InflightTracker } from '../state/inflight-tracker';
import { TEST_NOW } from './clock';

export interface EndpointSpec {
  readonly pod: string;
  readonly role?: EndpointRecord['role'];
  readonly group?: string;
  readonly namespace?: string;
  readonly modelServer?: string;
  readonly running?: number;
  readonly waiting?: number;
  readonly kv?: number;
  readonly ttftMs?: number;
  readonly tpotMs?: number;
  readonly latencyAt?: number;
  readonly scrapedAt?: number;
  readonly stale?: boolean;
  /** The pod-watcher replica named as the record's writer (scrape freshness). */
  readonly scrapedBy?: string;
  readonly ready?: boolean;
  readonly models?: readonly string[];
  readonly ip?: string;
  readonly port?: number;
  readonly bootstrapPort?: number;
  readonly dpSize?: number;
  readonly ecControlAddresses?: readonly string[];
}

/** An endpoint record with quiet defaults (ready, fresh metrics, idle). */
export function endpointRecord(spec: EndpointSpec): EndpointRecord {
  return EndpointRecordSchema.parse({
    schemaVersion: 1,
    namespace: spec.namespace ?? 'default',
    modelServer: spec.modelServer ?? 'ms',
    pod: spec.pod,
    role: spec.role ?? 'aggregated',
    ...(spec.group !== undefined ? { group: spec.group } : {}),
    ip: spec.ip ?? '10.0.0.1',
    port: spec.port ?? 8000,
    ...(spec.bootstrapPort !== undefined ? { bootstrapPort: spec.bootstrapPort } : {}),
    ...(spec.dpSize !== undefined ? { dpSize: spec.dpSize } : {}),
    ...(spec.ecControlAddresses !== undefined ? { ecControlAddresses: [...spec.ecControlAddresses] } : {}),
    engine: 'vLLM',
    ready: spec.ready ?? true,
    models: spec.models ?? ['m'],
    metrics: {
      running: spec.running ?? 0,
      waiting: spec.waiting ?? 0,
      kvCacheUsage: spec.kv ?? 0,
      ...(spec.ttftMs !== undefined ? { ttftMs: spec.ttftMs } : {}),
      ...(spec.tpotMs !== undefined ? { tpotMs: spec.tpotMs } : {}),
      ...(spec.latencyAt !== undefined ? { latencyAt: spec.latencyAt } : {}),
      scrapedAt: spec.scrapedAt ?? TEST_NOW - 500,
      stale: spec.stale ?? false,
    },
    ...(spec.scrapedBy !== undefined ? { scrapedBy: spec.scrapedBy } : {}),
    updatedAt: TEST_NOW - 500,
  });
}

export interface ModelServerSpecInput {
  readonly name?: string;
  readonly namespace?: string;
  readonly mode?: PipelineMode;
  /** For pd/epd: include prefill labels (false gives E→PD). Default true. */
  readonly prefill?: boolean;
  readonly model?: string;
  /** Default vLLM. */
  readonly engine?: 'vLLM' | 'SGLang';
}

/** A ModelServer record in the given mode (pdGroup with groupKey `group` for pd/epd). */
export function modelServerRecord(input: ModelServerSpecInput = {}): ModelServerRecord {
  const mode = input.mode ?? 'aggregated';
  const pdGroup =
    mode === 'aggregated'
      ? undefined
      : {
          groupKey: 'group',
          decodeLabels: { role: 'decode' },
          ...(input.prefill === false ? {} : { prefillLabels: { role: 'prefill' } }),
          ...(mode === 'epd' ? { encodeLabels: { role: 'encode' } } : {}),
        };
  return ModelServerRecordSchema.parse({
    schemaVersion: 1,
    namespace: input.namespace ?? 'default',
    name: input.name ?? 'ms',
    mode,
    spec: {
      model: input.model ?? 'm',
      inferenceEngine: input.engine ?? 'vLLM',
      pipelineMode: mode,
      workloadSelector: { matchLabels: { app: 'x' }, ...(pdGroup ? { pdGroup } : {}) },
      workloadPort: { port: 8000 },
    },
  });
}

/** An index holding `endpoints` (records or specs) and the ModelServer records. */
export function buildIndex(
  endpoints: readonly (EndpointSpec | EndpointRecord)[],
  modelServers: readonly ModelServerRecord[] = [modelServerRecord()],
): EndpointIndex {
  const index = new EndpointIndex();
  for (const ms of modelServers) index.applyModelServer({ op: 'PUT', value: ms });
  for (const e of endpoints) index.applyEndpoint({ op: 'PUT', value: 'schemaVersion' in e ? e : endpointRecord(e) });
  return index;
}

/** A scheduling request for ModelServer default/ms with schema defaults applied. */
export function schedulingRequest(input: Partial<SchedulingRequestInput> = {}): SchedulingRequest {
  return SchedulingRequestSchema.parse({ id: 'req-1', namespace: 'default', modelServer: 'ms', model: 'm', ...input });
}

/** Key of endpoint `pod` of default/ms. */
export const keyOf = (pod: string, modelServer = 'ms', namespace = 'default'): string => endpointKey(namespace, modelServer, pod);

/** The context a plugin sees while one request is scheduled. */
export function pluginContext(opts: { request?: SchedulingRequest; now?: number } = {}): CycleContext {
  const cycle = new Cycle();
  cycle.begin(opts.request ?? schedulingRequest(), opts.now ?? TEST_NOW);
  return cycle;
}

/** The endpoints of `pods` (default/ms) as the candidates of a profile run, in that order. */
export function candidatesOf(index: EndpointIndex, pods: readonly string[], tracker: InflightTracker = new InflightTracker()): Candidates {
  const set = new CandidateSet(index, tracker);
  set.reset(
    pods.map((p) => {
      const e = index.getIndexed(keyOf(p));
      if (!e) throw new Error(`no endpoint ${p}`);
      return e;
    }),
  );
  return set;
}

/** Runs one filter over candidates and returns the pods it keeps, in order. */
export function applyFilter(filter: Filter, ctx: CycleContext, candidates: Candidates): string[] {
  const keep = new Uint8Array(candidates.size).fill(1);
  filter.filter(ctx, candidates, keep);
  const kept: string[] = [];
  for (let i = 0; i < candidates.size; i++) if (keep[i] === 1) kept.push(candidates.endpoint(i).record.pod);
  return kept;
}

/** Runs one scorer over candidates and returns its scores, in candidate order. */
export function applyScorer(scorer: Scorer, ctx: CycleContext, candidates: Candidates): number[] {
  const out = new Float64Array(candidates.size);
  scorer.score(ctx, candidates, out);
  return [...out];
}
