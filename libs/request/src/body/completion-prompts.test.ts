import { completionPromptCount } from './completion-prompts';

describe('completionPromptCount', () => {
  it('counts a list of texts or of token-id lists entry by entry, and anything else as one prompt', () => {
    expect(completionPromptCount({ prompt: ['a', 'b', 'c'] })).toBe(3);
    expect(completionPromptCount({ prompt: [[1, 2], [3]] })).toBe(2);
    expect(completionPromptCount({ prompt: [1, 2, 3] })).toBe(1);
    expect(completionPromptCount({ prompt: 'one' })).toBe(1);
    expect(completionPromptCount({ prompt: ['one'] })).toBe(1);
    expect(completionPromptCount({ prompt: [] })).toBe(1);
    expect(completionPromptCount({})).toBe(1);
  });
});
