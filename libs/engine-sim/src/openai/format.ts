import type { OutputPlan } from '../engine/tokens';

/** What a response is built from (strings are JSON-encoded once per request, then spliced into templates). */
export interface ResponseView {
  /** Response id as the engine writes it (`chatcmpl-…`, `cmpl-…`, or SGLang's rid). */
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly promptTokens: number;
  readonly cachedTokens: number;
  /** Keys the deterministic output tokens. */
  readonly outputKey: number;
  /** Output tokens of the key the request already held (a continued answer): the first token written is this one. */
  readonly outputOffset: number;
  readonly plan: OutputPlan;
  readonly includeUsage: boolean;
  readonly continuousUsage: boolean;
  /** Seconds since arrival, for SGLang `meta_info.e2e_latency`. */
  readonly elapsedSec?: () => number;
}

/** Engine extensions to a non-streamed body, already JSON-encoded (`null` when absent). */
export interface BodyExtras {
  readonly kvTransferParams?: string;
  readonly ecTransferParams?: string;
}

/** Writes one response's SSE events; every string it returns is a run of complete `data: …\n\n` events. */
export interface StreamFramer {
  /** Events before the first token (the chat role chunk; empty for completions). */
  open(): string;
  /** Events for output tokens [from, to). */
  tokens(from: number, to: number): string;
  /** Events after the last token: separate finish chunk where the engine sends one, usage chunk, `[DONE]`. */
  close(): string;
}

/** How one engine renders one endpoint's responses. */
export interface ResponseFormat {
  body(view: ResponseView, extras: BodyExtras): string;
  framer(view: ResponseView): StreamFramer;
}

export const DONE_EVENT = 'data: [DONE]\n\n';

/** `{"prompt_tokens":P,"total_tokens":T,"completion_tokens":C` (left open so callers can append fields). */
export function usageFields(promptTokens: number, completionTokens: number): string {
  return `{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens + completionTokens},"completion_tokens":${completionTokens}`;
}
