import { waitFor } from '@triad/testing';
import { startSglangGenerateStack, type SglangGenerateStack } from './support/sglang-generate-stack';

// SGLang's native `/generate` answers carry no OpenAI `usage`: the gateway counts their tokens from `meta_info`
// (the token metric, and the output-token rate limit that settles on them), stream or not, batch or not, PD or not.

type Body = Record<string, unknown>;

interface GenerateOut {
  meta_info: { prompt_tokens: number; completion_tokens: number };
  index?: number;
}

/** The `meta_info` of each item's last event of a streamed answer (by `index`), from the client's bytes. */
function lastPerItem(sse: string): GenerateOut[] {
  const last = new Map<number, GenerateOut>();
  for (const e of sse.split('\n\n')) {
    if (!e.startsWith('data: {')) continue;
    const out = JSON.parse(e.slice('data: '.length)) as GenerateOut;
    last.set(out.index ?? 0, out);
  }
  return [...last.values()];
}

const sum = (outs: GenerateOut[], key: 'prompt_tokens' | 'completion_tokens') => outs.reduce((n, o) => n + o.meta_info[key], 0);

describe('gateway, token counts of SGLang /generate answers (meta_info)', () => {
  let stack: SglangGenerateStack;

  beforeAll(async () => {
    stack = await startSglangGenerateStack({ prefix: 'gen', host: '127.0.14', outputTokensPerUnit: 600 });
  });
  afterAll(async () => {
    await stack?.close();
  });

  const sample = (name: string, labels: Record<string, string>) => stack.sample(name, labels);

  /** One `/generate` request's answer, what the token counter gained, and the answer's own `meta_info` totals. */
  async function counted(
    model: string,
    body: Body,
  ): Promise<{ input: number; output: number; want: { input: number; output: number }; outs: GenerateOut[] }> {
    const { text, input, output } = await stack.counted(model, body);
    const outs =
      body['stream'] === true ? lastPerItem(text) : ([] as GenerateOut[]).concat(JSON.parse(text) as GenerateOut | GenerateOut[]);
    return { input, output, want: { input: sum(outs, 'prompt_tokens'), output: sum(outs, 'completion_tokens') }, outs };
  }

  it.each([
    ['non-stream', { text: 'Hello there', sampling_params: { max_new_tokens: 3 } }, 3],
    ['stream', { text: 'Hello there', stream: true, sampling_params: { max_new_tokens: 5 } }, 5],
    ['batch', { text: ['a b', 'c d e'], sampling_params: [{ max_new_tokens: 2 }, { max_new_tokens: 4 }] }, 6],
    ['streamed batch', { text: ['a b', 'c d e'], stream: true, sampling_params: { max_new_tokens: 3 } }, 6],
  ])('counts the completion tokens of a %s answer on an aggregated server', async (_name, body, completion) => {
    const got = await counted('gen-agg', body);
    expect(got.want.output).toBe(completion);
    expect(got.output).toBe(completion);
    expect(got.want.input).toBeGreaterThan(0);
    expect(got.input).toBe(got.want.input);
  });

  it.each([false, true])("counts the decode's tokens under PD (stream: %s)", async (stream) => {
    const got = await counted('gen-pd', { text: 'Hello there', stream, sampling_params: { max_new_tokens: 4 } });
    expect(got.output).toBe(4);
    expect(got.input).toBe(got.want.input);
  });

  // SGLang answers `sampling_params.n > 1` with one output per (prompt, sample), prompt-major, each output's meta_info
  // holding its whole prompt: the prompt is counted once per prompt, as an OpenAI answer's usage counts it.
  it.each([
    ['n=3', { text: 'Hello there', sampling_params: { n: 3, max_new_tokens: 3 } }, 1, 3],
    ['streamed n=3', { text: 'Hello there', stream: true, sampling_params: { n: 3, max_new_tokens: 5 } }, 1, 3],
    ['batch of 2 prompts × n=2', { text: ['a b', 'c d e f g h i j k'], sampling_params: { n: 2, max_new_tokens: 2 } }, 2, 2],
    [
      'streamed batch of 2 prompts × n=2',
      { text: ['a b', 'c d e f g h i j k'], stream: true, sampling_params: { n: 2, max_new_tokens: 4 } },
      2,
      2,
    ],
  ])('counts each prompt once and every sample of a %s answer on an aggregated server', async (_name, body, prompts, n) => {
    const got = await counted('gen-agg', body);
    const outs = [...got.outs].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
    expect(outs).toHaveLength(prompts * n);
    const maxNewTokens = body.sampling_params.max_new_tokens;
    expect(outs.map((o) => o.meta_info.completion_tokens)).toEqual(outs.map(() => maxNewTokens));
    expect(got.output).toBe(prompts * n * maxNewTokens);
    // Output i * n + j is sample j of prompt i: each prompt's tokens once.
    const perPrompt = outs.filter((_, i) => i % n === 0).map((o) => o.meta_info.prompt_tokens);
    expect(perPrompt.every((t) => t > 0)).toBe(true);
    expect(got.input).toBe(perPrompt.reduce((a, b) => a + b, 0));
    expect(got.input * n).toBe(got.want.input);
  });

  it.each([false, true])('counts each prompt once under PD, where the gateway fans n out itself (stream: %s)', async (stream) => {
    const got = await counted('gen-pd', { text: 'Hello there', stream, sampling_params: { n: 2, max_new_tokens: 4 } });
    expect(got.outs).toHaveLength(2);
    expect(got.output).toBe(8);
    expect(got.input).toBe(got.outs[0]?.meta_info.prompt_tokens);
    expect(got.input * 2).toBe(got.want.input);
  });

  it('reserves max_new_tokens and settles outputTokensPerUnit on the tokens /generate wrote', async () => {
    // Each request reserves its max_new_tokens (200) of the 600 and writes its natural length, fewer than 200 (the
    // sim ends an output at 64–127 tokens). A request is admitted while what was written plus 200 fits: at least four
    // are. Reserving the route default (1024, capped at 600) would refuse the second; keeping each whole reservation
    // charged (no counts read from meta_info) would refuse the fourth.
    const labels = { model: 'gen-limited', path: '/generate' };
    const body = { model: 'gen-limited', text: 'hi', sampling_params: { max_new_tokens: 200 } };
    let admitted = 0;
    for (let i = 0; i < 10; i++) {
      const written = await sample('kthena_router_tokens_total', { ...labels, token_type: 'output' });
      const res = await stack.post({ ...body, stream: i % 2 === 1 });
      if (written + 200 > 600) {
        expect([written, res.status]).toEqual([written, 429]);
        expect(((await res.json()) as { error: { message: string } }).error.message).toContain('Output token rate limit exceeded');
        break;
      }
      expect([i, res.status]).toEqual([i, 200]);
      await res.text();
      admitted++;
      // The reservation is settled when the gateway ends the request, which may be just after the client has it all.
      await waitFor(async () => (await sample('kthena_router_requests_total', { ...labels, status_code: '200' })) >= admitted, {
        what: `request ${i} to end`,
      });
    }
    expect(admitted).toBeGreaterThanOrEqual(4);
    expect(admitted).toBeLessThan(10);
  });
});
