import type { Usage } from '@triad/request';
import { parseSseEvent, SseEventSplitter, splitSseEvents, type SseEvent } from '../sse';
import type { StreamRelay } from '../types';
import type { ResumeState } from './resume-state';

interface UsageJson {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  total_tokens?: unknown;
}

interface ChoiceJson {
  delta?: { role?: unknown; content?: unknown; tool_calls?: unknown; reasoning_content?: unknown; reasoning?: unknown };
  text?: unknown;
  finish_reason?: unknown;
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

function nonEmpty(v: unknown): boolean {
  return (typeof v === 'string' && v.length > 0) || (Array.isArray(v) && v.length > 0);
}

/**
 * The relay of one leg of a resumable stream. It reads every event: the text and token counts go into the shared
 * {@link ResumeState}, and an event is rewritten (re-serialized) only where the client must see something else than
 * the engine wrote: a continuation's chunks carry the first leg's `id` and `created`, its role-only opening chunk is
 * dropped (the client had one), and usage counts the client's prompt once and every completion token it received;
 * per-chunk usage (which the gateway asks for to count tokens) and the final usage chunk are removed when the client
 * did not ask for them. A stream that ends without `[DONE]` is incomplete: the leg fails and the stream may resume.
 */
export class ResumeRelay implements StreamRelay {
  readonly #state: ResumeState;
  readonly #continuation: boolean;
  readonly #splitter = new SseEventSplitter();
  #opened = false;
  #completion = 0;
  #usage: Usage | undefined;

  constructor(state: ResumeState) {
    this.#state = state;
    this.#continuation = state.resumes > 0;
    state.tokensBefore = state.tokens;
    state.done = false;
    state.legWrote = false;
  }

  get usage(): Usage | undefined {
    return this.#usage;
  }

  push(chunk: Buffer): Buffer {
    const complete = this.#splitter.push(chunk);
    let out = '';
    let changed = false;
    for (const bytes of splitSseEvents(complete)) {
      const raw = bytes.toString('utf8');
      const written = this.#event(parseSseEvent(raw));
      changed ||= written !== raw;
      out += written;
    }
    if (out.length > 0) this.#state.legWrote = true;
    // Most chunks only need reading: the engine's bytes go out as they came, without encoding them again.
    if (!changed) return complete;
    return out.length === 0 ? EMPTY : Buffer.from(out);
  }

  /** An unterminated last event is dropped: it never reached the client, so its text is not part of the answer. */
  flush(): Buffer {
    this.#splitter.end();
    return EMPTY;
  }

  incomplete(): Error | undefined {
    return this.#state.done ? undefined : new Error('the stream ended before [DONE]');
  }

  /** What the client gets for one event: its own text unless it had to be dropped ('') or rewritten. */
  #event(event: SseEvent): string {
    if (event.raw.trim().length === 0) return '';
    if (event.data === '[DONE]') {
      this.#state.done = true;
      return event.raw;
    }
    if (event.data === '') return event.raw;
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(event.data) as Record<string, unknown>;
    } catch {
      return event.raw;
    }
    const rewritten = this.#chunk(json);
    if (rewritten === undefined) return '';
    return rewritten ? `data: ${JSON.stringify(json)}\n\n` : event.raw;
  }

  /** Reads (and rewrites in place) one chunk: undefined drops it, true means it changed. */
  #chunk(json: Record<string, unknown>): boolean | undefined {
    const state = this.#state;
    if (json['error'] !== undefined) {
      state.unresumable ??= 'engine_error';
      return false;
    }
    let changed = false;
    if (state.id === undefined) {
      state.id = json['id'];
      state.created = json['created'];
    } else if (this.#continuation) {
      if (json['id'] !== state.id) {
        json['id'] = state.id;
        changed = true;
      }
      if (json['created'] !== state.created && state.created !== undefined) {
        json['created'] = state.created;
        changed = true;
      }
    }
    const choices = json['choices'];
    const usage = json['usage'] as UsageJson | null | undefined;
    if (Array.isArray(choices) && choices.length === 0) {
      if (usage === null || usage === undefined) return changed;
      const totals = state.usageOf(count(usage.prompt_tokens) - state.tokensBefore, count(usage.completion_tokens));
      this.#usage = totals;
      state.usage = totals;
      if (!state.clientWantsUsage) return undefined;
      return this.#continuation ? writeUsage(usage, totals) || changed : changed;
    }
    const choice = (Array.isArray(choices) ? choices[0] : undefined) as ChoiceJson | undefined;
    if (choice === undefined) return changed;
    const delta = choice.delta;
    const text = state.chat ? delta?.content : choice.text;
    const hasText = typeof text === 'string' && text.length > 0;
    if (state.chat && !this.#opened) {
      this.#opened = true;
      // The client already had the answer's opening (role) chunk from the first leg.
      if (this.#continuation && !hasText && choice.finish_reason == null && delta?.tool_calls == null) return undefined;
    }
    if (delta !== undefined) {
      if (nonEmpty(delta.tool_calls)) state.unresumable ??= 'tool_calls';
      if (nonEmpty(delta.reasoning_content) || nonEmpty(delta.reasoning)) state.unresumable ??= 'reasoning';
    }
    if (hasText) {
      state.text += text;
      state.bytes += Buffer.byteLength(text);
    }
    if (usage !== null && usage !== undefined && typeof usage === 'object') {
      this.#completion = count(usage.completion_tokens);
      if (!this.#continuation && state.promptTokens === undefined) state.promptTokens = count(usage.prompt_tokens);
      if (!state.clientWantsContinuousUsage) {
        if (state.chat) delete json['usage'];
        else json['usage'] = null;
        changed = true;
      } else if (this.#continuation) {
        changed = writeUsage(usage, state.usageOf(0, this.#completion)) || changed;
      }
    } else if (hasText) {
      // An engine that did not count per chunk: one token per text chunk (both engines' default stream interval).
      this.#completion += 1;
    }
    state.tokens = state.tokensBefore + this.#completion;
    if (typeof choice.finish_reason === 'string') state.finishReason = choice.finish_reason;
    return changed;
  }
}

function writeUsage(usage: UsageJson, totals: Usage): boolean {
  usage.prompt_tokens = totals.promptTokens;
  usage.completion_tokens = totals.completionTokens;
  usage.total_tokens = totals.promptTokens + totals.completionTokens;
  return true;
}

const EMPTY = Buffer.alloc(0);
