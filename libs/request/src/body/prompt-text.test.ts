import { promptText } from './prompt-text';

const image = { type: 'image_url', image_url: { url: 'x' } };

describe("promptText for prefix hashing (the gateway's scheduling input)", () => {
  it('renders chat messages as ChatML from their text parts, skipping media and empty messages', () => {
    const body = {
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }, image, { type: 'input_text', text: 'there' }] },
        { role: 'assistant', content: [image] },
        { role: 7, content: 'odd role' },
        null,
      ],
    };
    expect(promptText(body)).toBe(
      '<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi\nthere<|im_end|>\n<|im_start|>user\nodd ' + 'role<|im_end|>\n',
    );
  });

  it("takes a completion's prompt string, and nothing else Kthena does not hash", () => {
    expect(promptText({ prompt: 'abc', messages: [{ role: 'user', content: 'x' }] })).toBe('abc');
    expect(promptText({ prompt: ['a', 'b'] })).toBe('');
    expect(promptText({ system: 'rules', messages: [{ role: 'user', content: 'q' }] })).toBe('<|im_start|>user\nq<|im_end|>\n');
    expect(promptText({ instructions: 'rules', input: 'question' })).toBe('');
  });
});

describe("promptText with allInputs (admission's token estimate)", () => {
  const all = { allInputs: true };

  it('renders chat messages as ChatML and keeps only text parts', () => {
    expect(promptText({ system: 'be brief', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }, image] }] }, all)).toBe(
      '<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n',
    );
    expect(
      promptText(
        {
          messages: [
            { role: 7, content: 'odd role' },
            { role: null, content: 'no role' },
          ],
        },
        all,
      ),
    ).toBe('<|im_start|>7\nodd role<|im_end|>\n<|im_start|>user\nno role<|im_end|>\n');
  });

  it('takes prompt strings and arrays, and Responses input with instructions', () => {
    expect(promptText({ prompt: 'abc' }, all)).toBe('abc');
    expect(promptText({ prompt: ['a', 3, 'b'] }, all)).toBe('a\nb');
    expect(promptText({ instructions: 'rules', input: 'question' }, all)).toBe('<|im_start|>developer\nrules<|im_end|>\nquestion');
    expect(
      promptText({ input: ['raw', { role: 'user', content: [{ type: 'input_text', text: 'q' }] }, { role: 'user', content: [] }] }, all),
    ).toBe('raw<|im_start|>user\nq<|im_end|>\n');
    expect(promptText(null, all)).toBe('');
  });
});
