import type { ReceivedSpan, TraceSummary } from '@triad/telemetry/receiver';

/** A problem the user can fix (receiver not running, unknown trace): printed without a stack, exit code 1. */
export class TraceCommandError extends Error {}

async function getJson<T>(url: string): Promise<{ status: number; body: T }> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    throw new TraceCommandError(
      `cannot reach the trace receiver at ${new URL(url).origin} (${cause}); start one with \`triad ` + `trace serve\``,
    );
  }
  const body = (await res.json().catch(() => ({}))) as T;
  return { status: res.status, body };
}

/** Recent traces from a `triad trace serve` receiver, newest first. */
export async function fetchTraces(from: string, limit: number): Promise<TraceSummary[]> {
  const { status, body } = await getJson<{ traces?: TraceSummary[]; error?: string }>(
    `${from.replace(/\/+$/, '')}/api/traces?limit=${limit}`,
  );
  if (status !== 200 || !body.traces) throw new TraceCommandError(`receiver answered ${status}: ${body.error ?? 'no trace list'}`);
  return body.traces;
}

/** Every span of one trace. */
export async function fetchTrace(from: string, traceId: string): Promise<ReceivedSpan[]> {
  const id = traceId.trim().toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(id)) {
    throw new TraceCommandError(`'${traceId}' is not a trace id (32 hex digits, as in the x-triad-trace-id header)`);
  }
  const { status, body } = await getJson<{ spans?: ReceivedSpan[]; error?: string }>(`${from.replace(/\/+$/, '')}/api/traces/${id}`);
  if (status === 404) throw new TraceCommandError(`trace ${id} not found at ${from} (not exported yet, sampled out, or sent elsewhere)`);
  if (status !== 200 || !body.spans) throw new TraceCommandError(`receiver answered ${status}: ${body.error ?? 'no spans'}`);
  return body.spans;
}
