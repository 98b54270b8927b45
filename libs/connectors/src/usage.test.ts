import { SseUsageRelay, parseBodyUsage } from './usage';

const content = (i: number) =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"t${i}"},"finish_reason":null}]}\n\n`;
const usage =
  'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"total_tokens":10,' +
  '"completion_tokens":3}}\n\n';
const done = 'data: [DONE]\n\n';

function relayAll(relay: SseUsageRelay, chunks: string[]): string {
  return chunks.map((c) => relay.push(Buffer.from(c)).toString()).join('') + relay.flush().toString();
}

describe('SseUsageRelay', () => {
  it('passes whole-event chunks through as the same Buffer', () => {
    const relay = new SseUsageRelay(false);
    const chunk = Buffer.from(content(0));
    expect(relay.push(chunk)).toBe(chunk);
  });

  it('reads usage and keeps the usage chunk when the client asked for it', () => {
    const relay = new SseUsageRelay(false);
    expect(relayAll(relay, [content(0), content(1), usage, done])).toBe(content(0) + content(1) + usage + done);
    expect(relay.usage).toEqual({ promptTokens: 7, completionTokens: 3 });
  });

  it('removes the injected usage chunk and nothing else, whatever the chunking', () => {
    const stream = content(0) + content(1) + usage + done;
    for (const size of [1, 3, 17, 64, stream.length]) {
      const chunks: string[] = [];
      for (let i = 0; i < stream.length; i += size) chunks.push(stream.slice(i, i + size));
      const relay = new SseUsageRelay(true);
      expect(relayAll(relay, chunks)).toBe(content(0) + content(1) + done);
      expect(relay.usage).toEqual({ promptTokens: 7, completionTokens: 3 });
    }
  });

  it('reads continuous usage but only drops the usage-only chunk', () => {
    const withUsage = 'data: {"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":7,"completion_tokens":1}}\n\n';
    const relay = new SseUsageRelay(true);
    expect(relayAll(relay, [withUsage, usage, done])).toBe(withUsage + done);
    expect(relay.usage?.completionTokens).toBe(3);
  });

  it('ignores "usage":null on completion chunks and writes an unterminated tail at the end', () => {
    const chunk = 'data: {"object":"text_completion","choices":[{"text":"a"}],"usage":null}\n\n';
    const relay = new SseUsageRelay(true);
    expect(relayAll(relay, [chunk, 'data: partial'])).toBe(`${chunk}data: partial`);
    expect(relay.usage).toBeUndefined();
  });
});

describe('parseBodyUsage', () => {
  it.each([
    {
      name: 'vLLM body',
      body:
        '{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":12,"total_tokens":20,"completion_tokens":8,' +
        '"prompt_tokens_details":null}}',
      want: { promptTokens: 12, completionTokens: 8 },
    },
    {
      name: 'spaces after the colon',
      body: '{"usage": {"prompt_tokens": 1, "completion_tokens": 2}}',
      want: { promptTokens: 1, completionTokens: 2 },
    },
    {
      name: 'generated text that mentions usage',
      body: '{"choices":[{"text":"\\"usage\\":{\\"prompt_tokens\\":99}"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}',
      want: { promptTokens: 3, completionTokens: 4 },
    },
    {
      name: 'nested details',
      body: '{"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens":6}}',
      want: { promptTokens: 5, completionTokens: 6 },
    },
    {
      name: 'Responses API body (input and output tokens)',
      body:
        '{"object":"response","output":[],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},' +
        '"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12},"user":null}',
      want: { promptTokens: 9, completionTokens: 3 },
    },
    { name: 'no usage', body: '{"choices":[]}', want: undefined },
  ])('$name', ({ body, want }) => {
    expect(parseBodyUsage(Buffer.from(body))).toEqual(want);
  });
});
