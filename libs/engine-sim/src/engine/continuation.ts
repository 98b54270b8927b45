import { fnv1a, planOutput, tokenText, type OutputLimits, type OutputPlan } from './tokens';

/**
 * Where a generation starts in the deterministic output of its key. A request whose answer begins with text this
 * simulator produced for the same context (a chat's final assistant message sent with `continue_final_message`, or
 * a completion prompt that ends with an earlier answer) continues that output at the token after it, as an engine
 * sampling greedily would: so a router that resumes a broken stream gets the rest of the same answer.
 */
export interface OutputStart {
  /** Keys the output tokens (the prompt without the continued answer, and the seed). */
  readonly key: number;
  /** Output tokens the request already holds (its continued text is tokens [0, offset) of `key`). */
  readonly offset: number;
}

/** How many whole output tokens of `key` spell `text` exactly, or -1 when `text` is not such a prefix. */
export function matchedTokens(key: number, text: string): number {
  let at = 0;
  let n = 0;
  while (at < text.length) {
    const t = tokenText(key, n);
    if (!text.startsWith(t, at)) return -1;
    at += t.length;
    n++;
  }
  return n;
}

/** A chat whose final assistant message `prefix` is continued after the rendered earlier messages `context`. */
export function chatStart(context: string, prefix: string, seedBasis: number): OutputStart {
  const key = fnv1a(context, seedBasis);
  const offset = matchedTokens(key, prefix);
  if (offset >= 0) return { key, offset };
  // Text this simulator did not produce: a fresh output for the whole context.
  return { key: fnv1a(prefix, fnv1a(`${context}assistant:`, seedBasis)), offset: 0 };
}

/**
 * A completion prompt: the longest tail that is an answer this simulator gave to the text before it (token texts
 * start with a space, so only spaces are split points), else the whole prompt with no offset.
 */
export function completionStart(prompt: string, seedBasis: number): OutputStart {
  let h = seedBasis >>> 0;
  for (let p = 0; p < prompt.length; p++) {
    if (prompt.charCodeAt(p) === 0x20) {
      const offset = matchedTokens(h, prompt.slice(p));
      if (offset > 0) return { key: h, offset };
    }
    h ^= prompt.charCodeAt(p);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return { key: h, offset: 0 };
}

/**
 * The tokens a continued request produces: the plan of the whole answer (natural length of the key, `max_tokens`
 * counted from the continuation as the engine sees it) less what the request already holds.
 */
export function planFrom(start: OutputStart, limits: OutputLimits): OutputPlan {
  if (start.offset === 0) return planOutput(start.key, limits);
  const whole = planOutput(start.key, {
    ...limits,
    ...(limits.maxTokens !== undefined ? { maxTokens: limits.maxTokens + start.offset } : {}),
    ...(limits.minTokens !== undefined ? { minTokens: limits.minTokens + start.offset } : {}),
  });
  return { count: Math.max(1, whole.count - start.offset), finishReason: whole.finishReason };
}
