import type { RateLimit } from '@triad/crd';
import { RequestLocal, promptText, type RequestContext, type RequestHooks } from '@triad/request';
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

/**
 * The prompts of an SGLang `/generate` body: a batch is a list of texts or of token-id lists (one `input_ids` list
 * of numbers is one prompt).
 */
function generatePrompts(body: Readonly<Record<string, unknown>>): number {
  const text = body['text'];
  if (Array.isArray(text)) return Math.max(1, text.length);
  const ids = body['input_ids'];
  return Array.isArray(ids) && Array.isArray(ids[0]) ? ids.length : 1;
}

/**
 * The most output an SGLang `/generate` body can ask for: `sampling_params.max_new_tokens` for every prompt of a
 * batch and each of its `n` samples, or the sum over a list of per-prompt sampling params. Undefined when a prompt
 * names no limit (the route's `defaultMaxTokens` applies, as for an OpenAI body without `max_tokens`).
 */
function generateMaxTokens(params: unknown, prompts: number): number | undefined {
  if (Array.isArray(params)) {
    let sum = 0;
    for (const p of params) {
      const n = generateMaxTokens(p, 1);
      if (n === undefined) return undefined;
      sum += n;
    }
    return sum;
  }
  if (typeof params !== 'object' || params === null) return undefined;
  const p = params as Record<string, unknown>;
  const max = tokenCount(p['max_new_tokens']);
  const n = tokenCount(p['n']) ?? 1;
  return max === undefined ? undefined : max * Math.max(1, n) * prompts;
}

function maxTokensOf(body: Readonly<Record<string, unknown>>, path: string): number | undefined {
  if (path === '/generate') return generateMaxTokens(body['sampling_params'], generatePrompts(body));
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
