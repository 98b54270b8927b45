import { BadRequestError, DEFAULT_REQUEST_LIMITS } from '@triad/request';
import { parseInferenceBody } from './parse-body';

const MESSAGES = [{ role: 'user', content: 'hi' }];

const parse = (body: unknown): Record<string, unknown> =>
  parseInferenceBody(Buffer.from(JSON.stringify(body)), '/v1/chat/completions', DEFAULT_REQUEST_LIMITS);

describe('parseInferenceBody: token and choice counts', () => {
  it.each([
    ['max_tokens', -1, "'max_tokens' must be an integer >= 0"],
    ['max_tokens', 1.5, "'max_tokens' must be an integer >= 0"],
    ['max_completion_tokens', '16', "'max_completion_tokens' must be an integer >= 0"],
    ['n', 0, "'n' must be an integer >= 1"],
  ])('refuses %s %j, naming the field', (field, value, message) => {
    const err = (() => {
      try {
        parse({ model: 'm', messages: MESSAGES, [field]: value });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(BadRequestError);
    expect((err as BadRequestError).message).toBe(message);
    expect((err as BadRequestError).param).toBe(field);
  });

  it('takes counts that are integers in range, and absent or null ones', () => {
    expect(parse({ model: 'm', messages: MESSAGES, max_tokens: 0, max_completion_tokens: 16, n: 1 })['max_completion_tokens']).toBe(16);
    expect(parse({ model: 'm', messages: MESSAGES, max_tokens: null, n: null })['n']).toBeNull();
  });
});
