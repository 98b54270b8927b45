import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

// SGLang beam search on `/generate` (`sampling_params.beam_width > 1`) end to end against the SGLang sims: one answer
// per prompt carrying `meta_info.beam_results`, counted as SGLang counts it (completion_tokens summed over the
// returned beams, the prompt once), reserved as what the engine decodes (beam_width × max_new_tokens), and under PD
// sent as one prefill/decode pair whose refusal reaches the client.

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
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

async function post(h: Harness, body: Body): Promise<Response> {
  return fetch(`${h.gateway.url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** The value of the first sample of `name` whose labels include every `labels` pair (0 when there is none). */
async function sample(h: Harness, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.includes(w)));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** The `data:` events of a streamed answer, `[DONE]` included. */
function events(sse: string): string[] {
  return sse
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice('data: '.length));
}

describe('gateway, SGLang beam search on /generate', () => {
  let h: Harness;
  let agg: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  beforeAll(async () => {
    h = await startHarness({ config: { scheduling: 'in-process' } });
    agg = await h.startSim({ engine: 'sglang', role: 'both', host: '127.0.61.1', model: MODEL });
    p = await h.startSim({ engine: 'sglang', role: 'prefill', host: '127.0.61.2', model: MODEL, bootstrapPort: 0 });
    d = await h.startSim({ engine: 'sglang', role: 'decode', host: '127.0.61.3', model: MODEL });
    await h.putServer('agg', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      workloadPort: { port: 30000, protocol: 'http' },
      workloadSelector: { matchLabels: { app: 'agg' } },
    });
    await h.putServer('pd', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      workloadPort: { port: 30000, protocol: 'http' },
      workloadSelector: { matchLabels: { app: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    const on = (server: string) => [{ targetModels: [{ modelServerName: server, weight: 100 }] }];
    await h.putRoute('beam-agg', { modelName: 'beam-agg', rules: on('agg') });
    await h.putRoute('beam-pd', { modelName: 'beam-pd', rules: on('pd') });
    // A month-long window cannot roll over while the test runs.
    await h.putRoute('beam-limited', {
      modelName: 'beam-limited',
      rules: on('agg'),
      rateLimit: { outputTokensPerUnit: 100, unit: 'month' },
    });
    await h.putEndpoint('agg', 'a', 'aggregated', agg);
    await h.putEndpoint('pd', 'p', 'prefill', p, { group: 'g1' });
    await h.putEndpoint('pd', 'd', 'decode', d, { group: 'g1' });
    await h.waitForModel('beam-agg');
    await h.waitForModel('beam-pd');
    await h.waitForModel('beam-limited');
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Sends one request, waits until the gateway has ended it, and returns the answer and what the token counter gained. */
  async function counted(model: string, body: Body): Promise<{ text: string; input: number; output: number }> {
    const labels = { model, path: '/generate' };
    const requests = await sample(h, 'kthena_router_requests_total', { ...labels, status_code: '200' });
    const input = await sample(h, 'kthena_router_tokens_total', { ...labels, token_type: 'input' });
    const output = await sample(h, 'kthena_router_tokens_total', { ...labels, token_type: 'output' });
    const res = await post(h, { model, ...body });
    expect(res.status).toBe(200);
    const text = await res.text();
    await waitFor(async () => (await sample(h, 'kthena_router_requests_total', { ...labels, status_code: '200' })) > requests, {
      what: 'the request to end',
    });
    return {
      text,
      input: (await sample(h, 'kthena_router_tokens_total', { ...labels, token_type: 'input' })) - input,
      output: (await sample(h, 'kthena_router_tokens_total', { ...labels, token_type: 'output' })) - output,
    };
  }

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
        const all = events(got.text);
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
      const res = await post(h, { ...body, stream: i % 2 === 1 });
      if (res.status === 429) {
        expect(((await res.json()) as { error: { message: string } }).error.message).toContain('Output token rate limit exceeded');
        break;
      }
      expect([i, res.status]).toEqual([i, 200]);
      await res.text();
      admitted++;
      // The reservation is settled when the gateway ends the request, which may be just after the client has it all.
      await waitFor(async () => (await sample(h, 'kthena_router_requests_total', { ...labels, status_code: '200' })) >= admitted, {
        what: `request ${i} to end`,
      });
    }
    expect(admitted).toBe(4);
    expect(await sample(h, 'kthena_router_tokens_total', { ...labels, token_type: 'output' })).toBe(80);
  });

  it.each([false, true])(
    "sends a PD beam search as one prefill/decode pair and gives the client the engine's refusal (stream: %s)",
    async (stream) => {
      const [pBefore, dBefore] = [inferenceRequests(p).length, inferenceRequests(d).length];
      const body = { model: 'beam-pd', text: 'Hello there', stream, sampling_params: { beam_width: 2, n: 2, max_new_tokens: 4 } };
      const res = await post(h, body);
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
