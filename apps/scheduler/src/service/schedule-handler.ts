import { z } from 'zod';
import {
  SCHEMA_VERSION,
  SchedulingLimits,
  SchedulingRequestSchema,
  readSchedulingRequest,
  validateMessage,
  type DecisionOrError,
  type ScheduleBatchReply,
} from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import type { HeaderMap, ServeContext } from '@triad/bus/client';
import type { EndpointIndex, Scheduler } from '@triad/scheduling';
import { extractBatchTraceContexts, finishDecideSpan, startDecideSpan } from '@triad/telemetry';
import type { SchedulerMetrics } from '../metrics';
import { epochAnchor, finishDecideWithPhases, type DecideObserver, type ToEpoch } from './decide-tracing';

/**
 * A schedule batch read leniently: the envelope must be valid, but each request is validated on its own, so one
 * malformed request gets its own SCHED_BAD_REQUEST decision instead of failing its batch-mates.
 */
export const LenientScheduleBatchSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  requests: z.array(z.unknown()).min(1).max(SchedulingLimits.maxBatch),
});
export type LenientScheduleBatch = z.infer<typeof LenientScheduleBatchSchema>;

/**
 * The batch envelope read by hand (one per batch on the hot path); undefined leaves it to `LenientScheduleBatchSchema`,
 * which refuses and explains the rest.
 */
export function readScheduleBatch(raw: unknown): LenientScheduleBatch | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const b = raw as { v?: unknown; requests?: unknown };
  const requests = b.requests;
  if (b.v !== SCHEMA_VERSION || !Array.isArray(requests) || requests.length < 1 || requests.length > SchedulingLimits.maxBatch)
    return undefined;
  for (const k in b) if (k !== 'v' && k !== 'requests') return undefined;
  return b as LenientScheduleBatch;
}

/**
 * The parent of every decide span of a batch read without headers (a replica that does not trace reads none): the
 * root context, which `extractBatchTraceContexts` would give each request in an array made and filled per batch.
 */
const NO_PARENT = extractBatchTraceContexts(undefined, 1)[0];

/** What the handler works with (one set per replica). */
export interface ScheduleHandlerDeps {
  readonly scheduler: Scheduler;
  readonly index: EndpointIndex;
  readonly metrics: SchedulerMetrics;
  /** The scheduler's observer; collects a request's phases when its span records. */
  readonly observer?: DecideObserver;
  /**
   * Record the phases of a traced decision as child spans (`TRIAD_TRACE_SCHEDULER_PHASES=true`). Without, a traced
   * decision is its decide span alone (with the decision's attributes): 1 span instead of 7 per EPD trace.
   */
  readonly tracePhases?: boolean;
}

/**
 * Turns a batch into decisions, one per request, in order; records latency and outcome per decision, and a
 * `schedule` span per request continuing that request's trace from the batch headers (no-ops when tracing is off).
 * A recording span gets a child per scheduling phase (plan, filter, score, pick, post-schedule), recorded after
 * the decision from the timings the scheduler reported, and the decision as attributes. With `replied` (the serve
 * context), the batch's metrics are recorded once the reply is written (the gateway waits for the reply, not for
 * them).
 */
export function handleScheduleBatch(
  batch: LenientScheduleBatch,
  deps: ScheduleHandlerDeps,
  headers?: HeaderMap,
  replied?: Pick<ServeContext, 'afterReply'>,
): ScheduleBatchReply {
  const { scheduler, index, metrics } = deps;
  const observer = deps.tracePhases === true ? deps.observer : undefined;
  const size = batch.requests.length;
  // Per decision: mode, outcome, seconds.
  const outcomes: (string | number)[] = [];
  const parents = headers === undefined ? undefined : extractBatchTraceContexts(headers, size);
  const decisions: DecisionOrError[] = batch.requests.map((raw, i) => {
    // The hand reader takes every well-formed request; the schema explains the others (or drops unknown fields).
    const parsed = validateMessage(SchedulingRequestSchema, raw, readSchedulingRequest, 3);
    if (!parsed.ok) {
      outcomes.push('unknown', ErrorCode.SchedBadRequest, 0);
      return {
        id: idOf(raw) ?? `#${i}`,
        ok: false,
        code: ErrorCode.SchedBadRequest,
        message: `invalid scheduling request: ${parsed.error}`,
      };
    }
    const request = parsed.value;
    const span = startDecideSpan(parents === undefined ? NO_PARENT : parents[i], { request, batchSize: size });
    let phases: ReturnType<DecideObserver['collect']> | undefined;
    let at: ToEpoch | undefined;
    if (observer && span.span.isRecording()) {
      at = epochAnchor();
      phases = observer.collect(request);
    }
    const t0 = performance.now();
    const decision = scheduler.schedule(request, Date.now());
    const seconds = (performance.now() - t0) / 1000;
    if (phases && at) finishDecideWithPhases(span, decision, phases, at);
    else finishDecideSpan(span, decision);
    const mode = decision.ok ? decision.mode : (index.pool(request.namespace, request.modelServer)?.record?.mode ?? 'unknown');
    outcomes.push(mode, decision.ok ? 'ok' : decision.code, seconds);
    return decision;
  });
  // An argument, not a named closure: a function made per batch is named at run time under esbuild's keepNames.
  if (replied !== undefined) replied.afterReply(() => recordBatch(metrics, size, outcomes));
  else recordBatch(metrics, size, outcomes);
  return { v: SCHEMA_VERSION, decisions };
}

/** Records a batch's size and its decisions' outcomes (mode, outcome, seconds per decision). */
function recordBatch(metrics: SchedulerMetrics, size: number, outcomes: readonly (string | number)[]): void {
  metrics.batchSize.observe(size);
  for (let i = 0; i < outcomes.length; i += 3) metrics.decided(outcomes[i] as string, outcomes[i + 1] as string, outcomes[i + 2] as number);
}

/** Best-effort id of a request that failed validation, so the gateway can match the error to it. */
function idOf(raw: unknown): string | undefined {
  const id = (raw as { id?: unknown } | null)?.id;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/** The reply to a batch that could not be read at all. */
export function batchError(code: string, message: string): ScheduleBatchReply {
  return { v: SCHEMA_VERSION, error: { code, message } };
}
