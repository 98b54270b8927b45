import type { RateLimit } from '@triad/crd';
import type { Admission, Admitted } from './admission';
import type { SpanLike } from './fairness/fair-queue';
import { promptText } from './tokens/prompt-text';

/**
 * The part of the gateway's per-request hook object (`HookRequest` in apps/gateway) admission reads. Declared
 * here structurally, so these hooks plug into the gateway's `composeHooks` without this library importing an app.
 */
export interface AdmissionHookRequest {
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly model: string;
  readonly body: Readonly<Record<string, unknown>>;
  /** The gateway's own estimate (chars / 4), used unless `tokenizer` is on. */
  readonly inputTokens: number;
  readonly locals: Record<string, unknown>;
  /** Aborts when the client goes away (lets a queued request leave the queue). */
  readonly signal?: AbortSignal;
}

/** How the request ended (`HookOutcome` in apps/gateway). */
export interface AdmissionHookOutcome {
  readonly status: number;
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number } | undefined;
}

export interface AdmissionHookOptions {
  /** `ModelRoute.spec.rateLimit` for a request model name (Kthena keys limits by the model name, before routing). */
  rateLimitFor(model: string): RateLimit | undefined;
  /** Re-estimate input tokens with the best local tokenizer instead of the gateway's chars / 4. */
  readonly tokenizer?: boolean;
  /** The request's span, for `triad.admission.*` events. */
  spanOf?(req: AdmissionHookRequest): SpanLike | undefined;
}

const LOCAL = 'triad.admission';

interface Ticket {
  readonly admitted: Admitted;
  started: boolean;
}

function maxTokensOf(body: Readonly<Record<string, unknown>>): number | undefined {
  const v = body['max_completion_tokens'] ?? body['max_tokens'] ?? body['max_output_tokens'];
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}

/**
 * Lifecycle hooks that run admission for the gateway: `admit` authenticates, checks the model, reserves tokens
 * and queues (a refusal is thrown as the TriadError the gateway maps to 401/403/429/503/504); `onEnd` releases
 * with the engine's usage. Without usage, a request that produced output keeps its whole reservation charged
 * (the engine did the work), one that failed before any output gets everything back.
 */
export function createAdmissionHooks(admission: Admission, opts: AdmissionHookOptions) {
  return {
    async admit(req: AdmissionHookRequest): Promise<void> {
      const auth = await admission.authenticate(req.headers);
      if (!auth.ok) throw auth.rejection.toError();
      const inputTokens = opts.tokenizer ? admission.estimateInputTokens(req.model, promptText(req.body)).tokens : req.inputTokens;
      const decision = await admission.admit({
        identity: auth.identity, model: req.model, rateLimit: opts.rateLimitFor(req.model), inputTokens,
        maxTokens: maxTokensOf(req.body), signal: req.signal, span: opts.spanOf?.(req), path: req.path,
      });
      if (!decision.ok) throw decision.rejection.toError();
      req.locals[LOCAL] = { admitted: decision, started: false } satisfies Ticket;
    },
    onFirstToken(req: AdmissionHookRequest): void {
      const ticket = req.locals[LOCAL] as Ticket | undefined;
      if (ticket) ticket.started = true;
    },
    onEnd(req: AdmissionHookRequest, outcome: AdmissionHookOutcome): void {
      const ticket = req.locals[LOCAL] as Ticket | undefined;
      if (!ticket) return;
      const { admitted } = ticket;
      if (outcome.usage) admitted.release({ inputTokens: outcome.usage.promptTokens, outputTokens: outcome.usage.completionTokens });
      else if (ticket.started || (outcome.status >= 200 && outcome.status < 300)) {
        admitted.release({ inputTokens: admitted.reservedInputTokens, outputTokens: admitted.reservedOutputTokens });
      } else admitted.release();
    },
  };
}
