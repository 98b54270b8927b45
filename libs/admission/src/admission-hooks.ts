import type { RateLimit } from '@triad/crd';
import {
  RequestLocal,
  generatePromptCount,
  generateSequenceCount,
  promptText,
  type RequestContext,
  type RequestHooks,
} from '@triad/request';
import type { Admission, Admitted } from './admission';
import type { SpanLike } from './fairness/fair-queue';

export interface AdmissionHookOptions {
  /** `ModelRoute.spec.rateLimit` for a request model name (Kthena keys limits by the model name, before routing). */
  rateLimitFor(model: string): RateLimit | undefined;
  /** Re-estimate input tokens with the best local tokenizer instead of the gateway's chars / 4. */
  readonly tokenizer?: boolean;
  /** The request's span, for `triad.admission.*` events. */
  spanOf?(ctx: RequestContext): SpanLike | undefined;
}

interface Ticket {
  readonly admitted: Admitted;
  started: boolean;
}

/** The limiter counts everything a request carries as input, not only what prefix hashing reads. */
const ALL_INPUTS = { allInputs: true } as const;

/** What `admit` took for a request, released in `onEnd`. */
const TICKET = new RequestLocal<Ticket>('triad.admission');

function tokenCount(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}

function maxNewTokens(params: unknown): number | undefined {
  return params !== null && typeof params === 'object' && !Array.isArray(params)
    ? tokenCount((params as Record<string, unknown>)['max_new_tokens'])
    : undefined;
}

/**
 * The most output an SGLang `/generate` body can ask for: `sampling_params.max_new_tokens` for every prompt of the
 * batch and each sequence the engine decodes for it (its samples, or a beam search's `beam_width` beams:
 * `generateSequenceCount`), or with a list of per-prompt sampling params each entry's for its prompt's sequences.
 * Undefined when a prompt names no limit (the route's `defaultMaxTokens` applies, as for an OpenAI body without
 * `max_tokens`).
 */
function generateMaxTokens(body: Readonly<Record<string, unknown>>): number | undefined {
  const params = body['sampling_params'];
  const sequences = generateSequenceCount(body);
  if (!Array.isArray(params)) {
    const max = maxNewTokens(params);
    return max === undefined ? undefined : max * sequences * generatePromptCount(body);
  }
  let sum = 0;
  for (const p of params) {
    const max = maxNewTokens(p);
    if (max === undefined) return undefined;
    sum += max;
  }
  return sum * sequences;
}

function maxTokensOf(body: Readonly<Record<string, unknown>>, path: string): number | undefined {
  if (path === '/generate') return generateMaxTokens(body);
  return tokenCount(body['max_completion_tokens'] ?? body['max_tokens'] ?? body['max_output_tokens']);
}

/**
 * Lifecycle hooks that run admission for the gateway: `admit` authenticates, checks the model, reserves tokens
 * and queues (a refusal is thrown as the request error the gateway answers with 401/403/429/503/504); `onEnd`
 * releases with the engine's usage. Without usage, a request that produced output keeps its whole reservation
 * charged (the engine did the work), one that failed before any output gets everything back.
 */
export function createAdmissionHooks(admission: Admission, opts: AdmissionHookOptions) {
  return {
    async admit(ctx: RequestContext): Promise<void> {
      const auth = await admission.authenticate(ctx.headers);
      if (!auth.ok) throw auth.rejection;
      const inputTokens = opts.tokenizer
        ? admission.estimateInputTokens(ctx.model, promptText(ctx.body, ALL_INPUTS)).tokens
        : ctx.inputTokens;
      const decision = await admission.admit({
        identity: auth.identity,
        model: ctx.model,
        rateLimit: opts.rateLimitFor(ctx.model),
        inputTokens,
        maxTokens: maxTokensOf(ctx.body, ctx.path),
        // The signal (an AbortController per request) only where something can wait on it: the fair queue; else
        // only to refuse a client already gone.
        signal: admission.config.fairness.enabled || ctx.sink.destroyed ? ctx.signal : undefined,
        span: opts.spanOf?.(ctx),
        path: ctx.path,
      });
      if (!decision.ok) throw decision.rejection;
      TICKET.set(ctx, { admitted: decision, started: false });
    },
    onFirstToken(ctx: RequestContext): void {
      const ticket = TICKET.get(ctx);
      if (ticket) ticket.started = true;
    },
    onEnd(ctx: RequestContext): void {
      const ticket = TICKET.get(ctx);
      if (!ticket) return;
      const { admitted } = ticket;
      const { status, usage } = ctx.result;
      if (usage) admitted.release({ inputTokens: usage.promptTokens, outputTokens: usage.completionTokens });
      else if (ticket.started || (status >= 200 && status < 300)) {
        admitted.release({ inputTokens: admitted.reservedInputTokens, outputTokens: admitted.reservedOutputTokens });
      } else admitted.release();
    },
  } satisfies RequestHooks;
}
