/**
 * Deterministic stand-ins for tokenization and sampling: the same prompt and seed always give the same output,
 * and counting is cheap (characters / 4), because a router benchmark must not pay for a real tokenizer.
 */

// Plain ASCII words with a leading space, so token text never needs JSON escaping when templates are filled in.
const WORDS = [
  'the',
  'a',
  'model',
  'token',
  'cache',
  'prefill',
  'decode',
  'encode',
  'batch',
  'queue',
  'router',
  'engine',
  'graph',
  'tensor',
  'layer',
  'block',
  'page',
  'stream',
  'chunk',
  'event',
  'reply',
  'prompt',
  'vector',
  'kernel',
  'memory',
  'latency',
  'through',
  'put',
  'fast',
  'slow',
  'light',
  'quiet',
  'north',
  'river',
  'stone',
  'cloud',
  'green',
  'amber',
  'violet',
  'silver',
  'paper',
  'window',
  'garden',
  'signal',
  'harbor',
  'lantern',
  'meadow',
  'orbit',
  'pixel',
  'quartz',
  'rocket',
  'saddle',
  'timber',
  'umbrella',
  'velvet',
  'walnut',
  'yonder',
  'zephyr',
  'and',
  'of',
  'to',
  'in',
  'is',
  'it',
];
const TOKEN_TEXTS: readonly string[] = WORDS.map((w) => ` ${w}`);
const FIRST_TOKEN_ID = 1000;

/** Token id the simulated tokenizer uses for end-of-sequence (what SGLang reports as `matched_stop`). */
export const EOS_TOKEN_ID = 2;

/** 32-bit FNV-1a of a string, optionally continuing from a previous hash. */
export function fnv1a(text: string, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** Approximate token count of text (about four characters per token, at least one for non-empty text). */
export function countTextTokens(text: string): number {
  return text.length === 0 ? 0 : Math.ceil(text.length / 4);
}

function mix(h: number, i: number): number {
  let x = (h ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x2c1b3c6d) >>> 0;
  x ^= x >>> 12;
  return x >>> 0;
}

/** Text of output token `i` for a generation keyed by `key`. */
export function tokenText(key: number, i: number): string {
  return TOKEN_TEXTS[mix(key, i) % TOKEN_TEXTS.length];
}

/** Id of output token `i` for a generation keyed by `key`. */
export function tokenId(key: number, i: number): number {
  return FIRST_TOKEN_ID + (mix(key, i) % TOKEN_TEXTS.length);
}

/** Concatenated text of output tokens [from, to). */
export function tokensText(key: number, from: number, to: number): string {
  let s = '';
  for (let i = from; i < to; i++) s += tokenText(key, i);
  return s;
}

export interface OutputPlan {
  /** Tokens to produce (>= 1). */
  readonly count: number;
  readonly finishReason: 'stop' | 'length';
}

export interface OutputLimits {
  readonly maxTokens?: number;
  readonly minTokens?: number;
  readonly ignoreEos?: boolean;
}

/**
 * How many tokens a generation produces: a natural length of 64..127 tokens picked by the key (ending in EOS, i.e.
 * `stop`), cut by `max_tokens` (`length`). So any request with max_tokens <= 64 gets exactly max_tokens tokens.
 */
export function planOutput(key: number, limits: OutputLimits): OutputPlan {
  const natural = Math.max(64 + (key % 64), limits.minTokens ?? 0);
  const max = limits.maxTokens;
  if (limits.ignoreEos) return { count: Math.max(1, max ?? natural), finishReason: 'length' };
  if (max !== undefined && max <= natural) return { count: Math.max(1, max), finishReason: 'length' };
  return { count: natural, finishReason: 'stop' };
}
