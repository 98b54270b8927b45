import type { Logger } from '@triad/runtime';
import { echo, errorCodeOf, type RequestContext } from '@triad/request';

const round = (ms: number): number => Math.round(ms * 1000) / 1000;

/**
 * One JSON line per request, in Kthena's access-log vocabulary plus per-stage timings and the endpoints of every
 * stage. Written through the service logger (pino, asynchronous).
 */
export function writeAccessLog(logger: Logger, ctx: RequestContext, endMs: number): void {
  const r = ctx.result;
  const routing = ctx.routing;
  const schedule = ctx.schedule;
  const line: Record<string, unknown> = {
    kind: 'access',
    method: ctx.method,
    path: ctx.path,
    status_code: r.status,
    request_id: ctx.id,
    // Client-chosen strings are cut short: one line must not carry megabytes a client sent.
    model_name: echo(ctx.model, 256),
    model_route: routing?.route ?? null,
    model_server: routing?.server.key ?? null,
    upstream_model: routing?.upstreamModel || null,
    mode: routing?.server.mode ?? null,
    stream: ctx.stream,
    endpoints: r.endpoints,
    upstream_attempts: r.tries,
    decided_locally: schedule?.local ?? false,
    input_tokens: r.usage?.promptTokens ?? ctx.inputTokens,
    output_tokens: r.usage?.completionTokens ?? 0,
    timings_ms: {
      total: round(endMs - ctx.receivedAt),
      schedule: round(schedule?.durationMs ?? 0),
      encode: round(r.encodeMs),
      prefill: round(r.prefillMs),
      decode: round(r.decodeMs),
      ttft: r.firstByteAt > 0 ? round(r.firstByteAt - ctx.receivedAt) : null,
    },
  };
  if (ctx.traceId !== undefined) line['trace_id'] = ctx.traceId;
  if (r.outliers.length > 0) line['outliers'] = r.outliers;
  if (r.kvStranded.length > 0) line['kv_stranded'] = r.kvStranded;
  if (r.stageFallbacks.length > 0) line['stage_fallback'] = r.stageFallbacks;
  if (r.resumes > 0) line['stream_resumes'] = r.resumes;
  if (r.resumeRefused !== undefined) line['stream_resume_refused'] = r.resumeRefused;
  if (r.error !== undefined) line['error'] = { type: errorCodeOf(r.error) ?? r.error.name, message: echo(r.error.message, 1024) };
  logger.info(line);
}
