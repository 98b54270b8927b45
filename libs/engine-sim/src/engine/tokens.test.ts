import { fnv1a, planOutput, tokensText, tokenText } from './tokens';

describe('deterministic output', () => {
  it('gives the same tokens for the same key and different ones for another key', () => {
    const a = fnv1a('prompt');
    expect(tokensText(a, 0, 10)).toBe(tokensText(a, 0, 10));
    expect(tokensText(a, 0, 10)).not.toBe(tokensText(fnv1a('other prompt'), 0, 10));
    expect(tokenText(a, 3)).toMatch(/^ [a-z]+$/);
  });

  it.each([
    ['max_tokens below the natural length', { maxTokens: 10 }, { count: 10, finishReason: 'length' }],
    ['max_tokens 64 (always reached)', { maxTokens: 64 }, { count: 64, finishReason: 'length' }],
    ['ignore_eos', { maxTokens: 500, ignoreEos: true }, { count: 500, finishReason: 'length' }],
    ['min_tokens above the natural length', { minTokens: 300, maxTokens: 1000 }, { count: 300, finishReason: 'stop' }],
  ])('plans %s', (_name, limits, expected) => {
    expect(planOutput(fnv1a('x'), limits)).toEqual(expected);
  });

  it('stops naturally within 64..127 tokens without max_tokens', () => {
    for (const p of ['a', 'b', 'c', 'd']) {
      const plan = planOutput(fnv1a(p), {});
      expect(plan.finishReason).toBe('stop');
      expect(plan.count).toBeGreaterThanOrEqual(64);
      expect(plan.count).toBeLessThan(128);
    }
  });
});
