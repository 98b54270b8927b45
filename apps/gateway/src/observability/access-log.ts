import type { Logger } from '@triad/runtime';
import type { InferenceRequest } from '../http/inference-request';

const round = (ms: number): number => Math.round(ms * 1000) / 1000;

/**
 * One JSON line per request, in Kthena's access-log vocabulary (kthena-router.md §5) plus per-stage timings
 * and the endpoints of every stage. Written through the service logger (pino, asynchronous).
 */
export function writeAccessLog(logger: Logger, req: InferenceRequest, endMs: number): void {
  const r = req.result;
  const line: Record<string, unknown> = {
    kind: 'access',
    method: req.method,
    path: req.path,
    status_code: r.status,
    request_id: req.id,
    model_name: req.model,
    model_route: req.route ?? null,
    model_server: req.modelServer ?? null,
    upstream_model: req.upstreamModel || null,
    mode: req.mode || null,
    stream: req.stream,
    endpoints: req.endpoints,
    upstream_attempts: r.tries,
    decided_locally: req.decidedLocally,
    input_tokens: r.usage?.promptTokens ?? req.inputTokens,
    output_tokens: r.usage?.completionTokens ?? 0,
    timings_ms: {
      total: round(endMs - req.receivedAt),
      schedule: round(req.scheduleMs),
      encode: round(r.encodeMs),
      prefill: round(r.prefillMs),
      decode: round(r.decodeMs),
      ttft: r.firstByteAt > 0 ? round(r.firstByteAt - req.receivedAt) : null,
    },
  };
  if (req.traceId !== undefined) line['trace_id'] = req.traceId;
  if (r.error !== undefined) {
    line['error'] = { type: (r.error as { code?: string }).code ?? r.error.name, message: r.error.message };
  }
  logger.info(line);
}
