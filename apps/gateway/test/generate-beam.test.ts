import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { inferenceRequests, sseData } from './support/harness';
import { startSglangGenerateStack, type SglangGenerateStack } from './support/sglang-generate-stack';

// SGLang beam search on `/generate` (`sampling_params.beam_width > 1`) end to end against the SGLang sims: one answer
// per prompt carrying `meta_info.beam_results`, counted as SGLang counts it (completion_tokens summed over the
// returned beams, the prompt once), reserved as what the engine decodes (beam_width × max_new_tokens), and under PD
// sent as one prefill/decode pair whose refusal reaches the client.

type Body = Record<string, unknown>;

interface BeamOut {
  text: string;
  output_ids: number[];
  meta_info: {
    prompt_tokens: number;
    completion_tokens: number;
    beam_results: { text: string; output_ids: number[]; meta_info: { sequence_score: number } }[];
  };
}

describe('gateway, SGLang beam search on /generate', () => {
  let stack: SglangGenerateStack;
  let agg: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  beforeAll(async () => {
    stack = await startSglangGenerateStack({ prefix: 'beam', host: '127.0.61', outputTokensPerUnit: 100 });
    ({ agg, p, d } = stack);
  });
  afterAll(async () => {
    await stack?.close();
  });

  const post = (body: Body) => stack.post(body);
  const sample = (name: string, labels: Record<string, string>) => stack.sample(name, labels);
  const counted = (model: string, body: Body) => stack.counted(model, body);

  it.each([false, true])(
    "passes the engine's beam answer through and counts the returned beams' tokens, the prompt once (stream: %s)",
    async (stream) => {
      const before = inferenceRequests(agg).length;
      const body = { text: 'The capital of France is', stream, sampling_params: { beam_width: 4, n: 3, max_new_tokens: 5 } };
      const got = await counted('beam-agg', body);
      // One request to the engine: SGLang does not expand a beam search into samples, nor does the gateway.
      expect(inferenceRequests(agg).length - before).toBe(1);
      let out: BeamOut;
      if (stream) {
        const all = sseData(got.text);
        expect(all).toHaveLength(2);
        expect(all[1]).toBe('[DONE]');
        out = JSON.parse(all[0]) as BeamOut;
      } else {
        out = JSON.parse(got.text) as BeamOut;
      }
      expect(out.meta_info.beam_results).toHaveLength(3);
      expect(out.text).toBe(out.meta_info.beam_results[0].text);
      expect(out.meta_info.completion_tokens).toBe(15);
      expect(got.output).toBe(15);
      expect(out.meta_info.prompt_tokens).toBeGreaterThan(0);
      expect(got.input).toBe(out.meta_info.prompt_tokens);
    },
  );

  it('counts each prompt of a beam batch once, with its beams summed', async () => {
    const body = { text: ['a b', 'c d e f g h i j k'], sampling_params: { beam_width: 2, n: 2, max_new_tokens: 3 } };
    const got = await counted('beam-agg', body);
    const outs = JSON.parse(got.text) as BeamOut[];
    expect(outs).toHaveLength(2);
    expect(outs.map((o) => o.meta_info.completion_tokens)).toEqual([6, 6]);
    expect(got.output).toBe(12);
    expect(got.input).toBe(outs[0].meta_info.prompt_tokens + outs[1].meta_info.prompt_tokens);
  });

  it('reserves beam_width × max_new_tokens of outputTokensPerUnit and settles on the summed beams', async () => {
    // Each request reserves 4 × 10 = 40 of the 100 and writes 2 beams of 10 tokens (20). Request k is admitted
    // while what was written before it plus 40 fits: 20 (k − 1) + 40 <= 100, so exactly four are. Reserving n × 10
    // (20) would admit a fifth; settling on the best beam alone (10) would admit seven.
    const labels = { model: 'beam-limited', path: '/generate' };
    const body = { model: 'beam-limited', text: 'hi', sampling_params: { beam_width: 4, n: 2, max_new_tokens: 10 } };
    let admitted = 0;
    for (let i = 0; i < 8; i++) {
      const res = await post({ ...body, stream: i % 2 === 1 });
      if (res.status === 429) {
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
    expect(admitted).toBe(4);
    expect(await sample('kthena_router_tokens_total', { ...labels, token_type: 'output' })).toBe(80);
  });

  it.each([false, true])(
    "sends a PD beam search as one prefill/decode pair and gives the client the engine's refusal (stream: %s)",
    async (stream) => {
      const [pBefore, dBefore] = [inferenceRequests(p).length, inferenceRequests(d).length];
      const body = { model: 'beam-pd', text: 'Hello there', stream, sampling_params: { beam_width: 2, n: 2, max_new_tokens: 4 } };
      const res = await post(body);
      const text = await res.text();
      // Non-stream, SGLang answers 400; streamed, it opens the stream and yields the aborted output (an abort finish
      // reason with status_code 400, not an error event). Either way nothing reached the client yet, so the gateway
      // relays the engine's 4xx in its own error shape, naming the stage that refused first.
      expect(res.status).toBe(400);
      expect(JSON.parse(text)).toEqual({
        error: {
          message: expect.stringMatching(/^(prefill|decode) failed with HTTP 400: Beam search is not supported with PD disaggregation\.$/),
          type: 'invalid_request_error',
          param: null,
          code: 'GATEWAY_UPSTREAM_ERROR',
        },
      });
      await waitFor(() => inferenceRequests(p).length > pBefore && inferenceRequests(d).length > dBefore, { what: 'both legs' });
      expect([inferenceRequests(p).length - pBefore, inferenceRequests(d).length - dBefore]).toEqual([1, 1]);
      // The body goes as the client sent it: n and beam_width untouched, one room.
      const sent = JSON.parse(inferenceRequests(d).at(-1)!.rawBody) as { sampling_params: Body; bootstrap_room: unknown };
      expect(sent.sampling_params).toMatchObject({ beam_width: 2, n: 2 });
      expect(typeof sent.bootstrap_room).toBe('number');
    },
  );
});
