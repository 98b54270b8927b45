import type { StreamResumePolicy } from '@triad/crd';
import type { ProxyRequest } from '@triad/request';
import type { StreamRelay } from '../types';
import { resumeRefusal } from './eligibility';
import { ResumeRelay } from './resume-relay';
import { ResumeState, type ResumeRefusal } from './resume-state';

/** How a stream that broke mid-answer ended (`triad_gateway_stream_resumes_total{outcome}`). */
export type StreamResumeOutcome = 'resumed' | 'completed' | 'failed' | 'refused';

/** What the stage loop does with a stream that broke after bytes reached the client. */
export type ResumeStep =
  | { readonly kind: 'resume' }
  | { readonly kind: 'complete'; readonly tail: Buffer }
  | { readonly kind: 'refuse'; readonly reason: ResumeRefusal };

/**
 * One streamed request on a ModelServer with `trafficPolicy.streamResume`. It keeps what the client received
 * ({@link ResumeState}, through a {@link ResumeRelay} per final leg) and, when the final leg breaks, says whether
 * the stream can go on: a continuation re-issued through the connector on the decision's next attempt, with the
 * text sent so far as the start of the answer (chat: a final assistant message with `continue_final_message`;
 * completions: the text appended to the prompt), the token limits cut by what was sent, every other field as the
 * client sent it.
 */
export class StreamResume {
  readonly #policy: StreamResumePolicy;
  readonly #state: ResumeState;
  readonly #refusal: string | undefined;
  /** The client's token limit (`max_completion_tokens`, else `max_tokens`), if it set one. */
  readonly #limit: number | undefined;
  #outcome: StreamResumeOutcome | undefined;

  private constructor(policy: StreamResumePolicy, ctx: ProxyRequest, refusal: string | undefined) {
    const server = ctx.routing.server;
    const engine = server.kind === 'engine' ? server.engine : 'vLLM';
    const body = ctx.body;
    const options = body['stream_options'] as { continuous_usage_stats?: unknown } | null | undefined;
    const continuous = options !== null && typeof options === 'object' && options.continuous_usage_stats === true;
    // Worked out once per request by the planner (the leg relays read the state's copy on every chunk).
    const wantsUsage = ctx.proxy.clientWantsUsage;
    this.#policy = policy;
    this.#refusal = refusal;
    const limit = body['max_completion_tokens'] ?? body['max_tokens'];
    this.#limit = typeof limit === 'number' ? limit : undefined;
    this.#state = new ResumeState(ctx.path === '/v1/chat/completions', wantsUsage, continuous && (wantsUsage || engine === 'SGLang'));
  }

  /** The resume of `ctx`, or undefined when its ModelServer does not resume streams or it is not a stream. */
  static of(ctx: ProxyRequest): StreamResume | undefined {
    const server = ctx.routing.server;
    if (server.kind !== 'engine' || server.streamResume === undefined || !ctx.stream || !ctx.proxy.injectUsage) return undefined;
    return new StreamResume(server.streamResume, ctx, resumeRefusal(ctx.path, ctx.body));
  }

  /** Eligible requests get their own relay per final leg; others keep the plain relay (and fail as before). */
  get eligible(): boolean {
    return this.#refusal === undefined;
  }

  get resumes(): number {
    return this.#state.resumes;
  }

  get outcome(): StreamResumeOutcome | undefined {
    return this.#outcome;
  }

  /** A continuation leg is running that has not written to the client yet (its failure is an ordinary retry). */
  get continuationSilent(): boolean {
    return this.#state.resumes > 0 && !this.#state.legWrote;
  }

  relay(): StreamRelay {
    return new ResumeRelay(this.#state);
  }

  /** What the final legs are built from: the client's body with per-chunk usage on, and, once resumed, the continuation. */
  legBody(body: Record<string, unknown>): Record<string, unknown> {
    const state = this.#state;
    const options = body['stream_options'];
    const base = options !== null && typeof options === 'object' ? (options as Record<string, unknown>) : {};
    const out: Record<string, unknown> = { ...body, stream_options: { ...base, include_usage: true, continuous_usage_stats: true } };
    if (state.resumes === 0 || state.text.length === 0) return out;
    if (state.chat) {
      const messages = Array.isArray(body['messages']) ? (body['messages'] as unknown[]) : [];
      out['messages'] = [...messages, { role: 'assistant', content: state.text }];
      // vLLM refuses continue_final_message beside add_generation_prompt (true by default); SGLang ignores the latter.
      out['continue_final_message'] = true;
      out['add_generation_prompt'] = false;
    } else {
      out['prompt'] = `${body['prompt'] as string}${state.text}`;
    }
    for (const key of ['max_tokens', 'max_completion_tokens', 'max_new_tokens'] as const) {
      const v = body[key];
      if (typeof v === 'number') out[key] = Math.max(1, v - state.tokens);
    }
    const min = body['min_tokens'];
    if (typeof min === 'number') out['min_tokens'] = Math.max(0, min - state.tokens);
    return out;
  }

  /**
   * The final leg broke after bytes reached the client. `nextAttempt` says whether the decision has another attempt.
   * Resume when the policy and the answer allow it; complete the stream when the answer had already ended.
   */
  broke(nextAttempt: boolean): ResumeStep {
    const state = this.#state;
    let reason: ResumeRefusal | undefined;
    if (this.#refusal !== undefined) reason = 'not_eligible';
    else if (state.unresumable !== undefined) reason = state.unresumable;
    else if (state.finishReason !== undefined) return { kind: 'complete', tail: this.#tail(undefined) };
    // Every token the client allowed was sent (SGLang sends the finish reason in a chunk of its own, after the text).
    else if (this.#limit !== undefined && state.tokens >= this.#limit) return { kind: 'complete', tail: this.#tail('length') };
    else if (state.resumes >= this.#policy.maxResumes) reason = 'max_resumes';
    else if (state.tokens > this.#policy.maxTokens) reason = 'max_tokens';
    else if (state.bytes > this.#policy.maxBytes) reason = 'max_bytes';
    else if (!nextAttempt) reason = 'no_alternate';
    if (reason !== undefined) {
      this.#outcome = state.resumes > 0 ? 'failed' : 'refused';
      return { kind: 'refuse', reason };
    }
    state.resumes += 1;
    // Until the continuation's answer writes, its failure (a connect error, its prefill failing) is only a retry.
    state.legWrote = false;
    this.#outcome = 'resumed';
    return { kind: 'resume' };
  }

  /** The stream was completed by the gateway after the final chunk (`complete`). */
  completed(): void {
    this.#outcome = 'completed';
  }

  /** The request ended with an error after a resume: the resume did not save it. */
  ended(ok: boolean): void {
    if (!ok && this.#outcome === 'resumed') this.#outcome = 'failed';
  }

  /** Usage the client was told (or would have been), for metrics and the access log. */
  get usage(): { promptTokens: number; completionTokens: number } | undefined {
    const s = this.#state;
    return s.usage ?? (s.promptTokens === undefined ? undefined : { promptTokens: s.promptTokens, completionTokens: s.tokens });
  }

  /**
   * Closing events of an answer whose text the client has: the finish chunk when it had none (`finish`), usage if
   * asked, `[DONE]`.
   */
  #tail(finish: string | undefined): Buffer {
    const s = this.#state;
    let out = '';
    if (finish !== undefined) {
      const choice = s.chat ? { index: 0, delta: {}, finish_reason: finish } : { index: 0, text: '', finish_reason: finish };
      const object = s.chat ? 'chat.completion.chunk' : 'text_completion';
      out += `data: ${JSON.stringify({ id: s.id, object, created: s.created, choices: [choice] })}\n\n`;
    }
    if (s.clientWantsUsage && s.usage === undefined && s.promptTokens !== undefined) {
      const usage = { prompt_tokens: s.promptTokens, completion_tokens: s.tokens, total_tokens: s.promptTokens + s.tokens };
      const object = s.chat ? 'chat.completion.chunk' : 'text_completion';
      out += `data: ${JSON.stringify({ id: s.id, object, created: s.created, choices: [], usage })}\n\n`;
    }
    return Buffer.from(`${out}data: [DONE]\n\n`);
  }
}
