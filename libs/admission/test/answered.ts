import { toOpenAiError } from '@triad/request';
import type { AdmissionRejection } from '../src/rejection';

/** A refusal as the gateway answers it (the one OpenAI error mapping: status, headers, parsed body) next to its own facts. */
export function answered(rejection: AdmissionRejection) {
  const e = toOpenAiError(rejection);
  const body = JSON.parse(e.body) as { error: Record<string, unknown> };
  return { code: rejection.code, reason: rejection.reason, message: rejection.message, status: e.status, headers: e.headers, body };
}

/** An `authenticate` / `admit` outcome with its refusal, if any, as the gateway answers it. */
export function answeredOutcome<T extends { ok: true }>(outcome: T | { ok: false; rejection: AdmissionRejection }) {
  return outcome.ok ? outcome : { ok: false as const, rejection: answered(outcome.rejection) };
}
