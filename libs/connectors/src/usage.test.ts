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

/** SGLang's `meta_info` as tokenizer_manager.py builds it (key order included). */
const metaInfo = (prompt: number, completion: number, finish = '{"type":"length","length":2}') =>
  `{"id":"r1","finish_reason":${finish},"prompt_tokens":${prompt},"weight_version":"default","num_retractions":0,` +
  `"reasoning_tokens":0,"completion_tokens":${completion},"cached_tokens":0,"e2e_latency":0.01}`;

describe('parseBodyUsage on SGLang /generate answers (meta_info)', () => {
  it.each([
    {
      name: 'one answer',
      body: `{"text":"ab","output_ids":[5,6],"meta_info":${metaInfo(11, 2)}}`,
      want: { promptTokens: 11, completionTokens: 2 },
    },
    {
      name: 'generated text that mentions meta_info and its counts',
      body:
        '{"text":"\\"meta_info\\":{\\"prompt_tokens\\":99,\\"completion_tokens\\":99}","output_ids":[1],' +
        `"meta_info":${metaInfo(4, 1)}}`,
      want: { promptTokens: 4, completionTokens: 1 },
    },
    {
      name: 'a batch: a list of answers, summed',
      body: `[{"text":"a","output_ids":[1],"meta_info":${metaInfo(3, 2)}},{"text":"b","output_ids":[2],"meta_info":${metaInfo(5, 7)}}]`,
      want: { promptTokens: 8, completionTokens: 9 },
    },
    {
      name: 'a stop string with braces and logprob texts with key names (strings are skipped whole)',
      body:
        '{"text":"x","meta_info":{"id":"r","finish_reason":{"type":"stop","matched":"}}]"},"prompt_tokens":6,' +
        '"output_token_logprobs":[[-0.5,17,"\\"completion_tokens\\":50"],[-0.1,3,"completion_tokens"]],' +
        '"cached_tokens_details":{"completion_tokens":77},"completion_tokens":2,"cached_tokens":1}}',
      want: { promptTokens: 6, completionTokens: 2 },
    },
    {
      name: "Python json.dumps's spaces",
      body: '{"text": "a", "meta_info": {"id": "r", "prompt_tokens": 3, "completion_tokens": 4}}',
      want: { promptTokens: 3, completionTokens: 4 },
    },
    {
      name: 'both usage and meta_info: the usage',
      body: `{"text":"a","meta_info":${metaInfo(3, 4)},"usage":{"prompt_tokens":30,"completion_tokens":40}}`,
      want: { promptTokens: 30, completionTokens: 40 },
    },
    {
      name: 'an embedding answer (meta_info without completion tokens)',
      body: '{"embedding":[0.1],"meta_info":{"id":"r","finish_reason":null,"prompt_tokens":5}}',
      want: { promptTokens: 5, completionTokens: 0 },
    },
    { name: 'meta_info without counts', body: '{"text":"a","meta_info":{"id":"r"}}', want: undefined },
    { name: 'a cut-off body', body: `{"text":"a","meta_info":{"id":"r","prompt_tokens":3,"completion_tokens":`, want: undefined },
  ])('$name', ({ body, want }) => {
    expect(parseBodyUsage(Buffer.from(body))).toEqual(want);
  });
});

describe('SseUsageRelay on SGLang /generate streams (meta_info)', () => {
  const event = (text: string, completion: number, index?: number) =>
    `data: {"text":"${text}","output_ids":[],"meta_info":${metaInfo(9, completion)}${index === undefined ? '' : `,"index":${index}`}}\n\n`;

  function chunked(stream: string, size: number): string[] {
    const chunks: string[] = [];
    for (let i = 0; i < stream.length; i += size) chunks.push(stream.slice(i, i + size));
    return chunks;
  }

  it('takes the last (cumulative) counts, unchanged bytes, whatever the chunking', () => {
    const stream = event('a', 1) + event('ab', 2) + event('abc', 3) + done;
    for (const size of [1, 5, 33, stream.length]) {
      const relay = new SseUsageRelay(false, true);
      expect(relayAll(relay, chunked(stream, size))).toBe(stream);
      expect(relay.usage).toEqual({ promptTokens: 9, completionTokens: 3 });
    }
  });

  it("sums a batch's items, each at its last event", () => {
    const stream = event('a', 1, 0) + event('x', 1, 1) + event('ab', 2, 0) + event('xy', 2, 1) + event('xyz', 3, 1) + done;
    for (const size of [7, stream.length]) {
      const relay = new SseUsageRelay(false, true);
      expect(relayAll(relay, chunked(stream, size))).toBe(stream);
      expect(relay.usage).toEqual({ promptTokens: 18, completionTokens: 5 });
    }
  });

  it('ignores meta_info inside generated text', () => {
    const tricky =
      'data: {"text":"\\"meta_info\\":{\\"completion_tokens\\":99}","meta_info":{"id":"r","prompt_tokens":2,"completion_tokens":1}}\n\n';
    const relay = new SseUsageRelay(false, true);
    relayAll(relay, [tricky, done]);
    expect(relay.usage).toEqual({ promptTokens: 2, completionTokens: 1 });
  });

  it('prefers a usage event to meta_info', () => {
    const relay = new SseUsageRelay(false, true);
    relayAll(relay, [event('a', 1), usage, done]);
    expect(relay.usage).toEqual({ promptTokens: 7, completionTokens: 3 });
  });

  it('reads no meta_info unless asked (OpenAI streams)', () => {
    const relay = new SseUsageRelay(false);
    relayAll(relay, [event('a', 1), done]);
    expect(relay.usage).toBeUndefined();
  });
});
