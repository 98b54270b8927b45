import type { Usage } from '@triad/request';

/** Why a broken stream is not resumed (the metric's `refused` outcome; the access log names the reason). */
export type ResumeRefusal =
  'not_eligible' | 'max_tokens' | 'max_bytes' | 'max_resumes' | 'no_alternate' | 'tool_calls' | 'reasoning' | 'engine_error' | 'client';

/**
 * What one resumable stream sent the client so far, across its legs: the answer's id and text, the completion tokens
 * (engines count them in the usage of every chunk, which the gateway asks for), and what the client asked to see.
 */
export class ResumeState {
  /** The answer's id and `created` as the client first saw them; every later chunk carries them. */
  id: unknown = undefined;
  created: unknown = undefined;
  text = '';
  bytes = 0;
  /** Completion tokens the client received. */
  tokens = 0;
  /** Completion tokens sent before the current leg (what the continuation's own counts are added to). */
  tokensBefore = 0;
  /** The client's prompt tokens, from the first leg's usage. */
  promptTokens: number | undefined = undefined;
  finishReason: string | undefined = undefined;
  /** A part of the answer a continuation cannot reproduce (tool-call deltas, reasoning, an engine error event). */
  unresumable: ResumeRefusal | undefined = undefined;
  /** The final usage chunk of the current leg was seen (its totals are in `usage`). */
  usage: Usage | undefined = undefined;
  /** The current leg's `[DONE]` was seen. */
  done = false;
  /** Continuation legs started so far. */
  resumes = 0;
  /** The current leg wrote something to the client. */
  legWrote = false;

  constructor(
    readonly chat: boolean,
    readonly clientWantsUsage: boolean,
    readonly clientWantsContinuousUsage: boolean,
  ) {}

  /** Totals the client gets: its own prompt once, and every completion token it received. */
  usageOf(promptTokens: number, legCompletion: number): Usage {
    return { promptTokens: this.promptTokens ?? promptTokens, completionTokens: this.tokensBefore + legCompletion };
  }
}
