import { Registry } from 'prom-client';
import { RateLimitedError, RequestError, toOpenAiError, type RequestContext, type Usage } from '@triad/request';
import { RecordingSink, requestContext } from '@triad/request/testing';
import { createAdmission, type Admission } from './admission';
import { createAdmissionHooks } from './admission-hooks';
import { generateApiKey, hashApiKey } from './auth/api-key-hash';

const request = (key: string | undefined, body: Record<string, unknown> = {}): RequestContext =>
  requestContext({
    path: '/v1/chat/completions',
    headers: key ? { authorization: `Bearer ${key}` } : {},
    body: { model: 'llama-3', ...body },
    inputTokens: 40,
  });

/** The refusal as the gateway answers it: code, status and headers, and a rate limit's own facts. */
async function rejection(p: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await p;
  } catch (err) {
    if (!(err instanceof RequestError)) throw err;
    const answer = toOpenAiError(err);
    const limit = err instanceof RateLimitedError ? { limitType: err.limitType, retryAfterSeconds: err.retryAfter } : {};
    return { code: err.code, status: answer.status, headers: answer.headers, ...limit };
  }
  throw new Error('expected a rejection');
}

/** How the gateway ends a request for the hooks: its status and usage in `ctx.result`. */
function ended(ctx: RequestContext, status: number, usage: Usage | undefined): RequestContext {
  ctx.result.status = status;
  ctx.result.usage = usage;
  return ctx;
}

describe('createAdmissionHooks (the gateway lifecycle adapter)', () => {
  const { key, id } = generateApiKey();
  let admission: Admission;
  beforeAll(async () => {
    admission = await createAdmission(
      {
        auth: { apiKeys: { keys: [{ name: 'ci', id, hash: hashApiKey(key, { N: 1024, r: 8, p: 1 }) }] } },
        rateLimit: { lease: { maxFraction: 0 } },
      },
      { registry: new Registry() },
    );
  });
  afterAll(async () => {
    await admission.close();
  });
  const hooks = () =>
    createAdmissionHooks(admission, { rateLimitFor: (m) => (m === 'llama-3' ? { inputTokensPerUnit: 100, unit: 'hour' } : undefined) });

  it('throws the TriadError the gateway maps to 401, with the WWW-Authenticate header in the details', async () => {
    expect(await rejection(hooks().admit(request(undefined)))).toMatchObject({
      code: 'GATEWAY_UNAUTHORIZED',
      status: 401,
      headers: { 'www-authenticate': 'Bearer realm="triad"' },
    });
  });

  it('refuses a request whose client left before admission (no fair queue to leave)', async () => {
    const sink = new RecordingSink();
    sink.destroyed = true;
    const gone = requestContext({
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${key}` },
      body: { model: 'llama-3' },
      inputTokens: 1,
      sink,
    });
    expect(await rejection(hooks().admit(gone))).toMatchObject({ code: 'GATEWAY_CLIENT_ABORTED' });
  });

  it('reserves with the route limit, refuses with retryAfterSeconds and limitType, and refunds failed requests', async () => {
    const h = hooks();
    const first = request(key);
    await h.admit(first);
    await h.admit(request(key));
    expect(await rejection(h.admit(request(key)))).toMatchObject({
      code: 'GATEWAY_RATE_LIMITED',
      status: 429,
      limitType: 'input',
      retryAfterSeconds: expect.any(Number),
    });
    h.onEnd(ended(first, 502, undefined)); // failed before any output: everything back
    await h.admit(request(key));
  });

  it('charges the real usage, or the whole reservation when output was produced without usage', async () => {
    const h = createAdmissionHooks(admission, { rateLimitFor: () => ({ outputTokensPerUnit: 100, unit: 'hour' }) });
    const a = request(key, { max_tokens: 60, model: 'out-model' });
    await h.admit(a);
    h.onFirstToken(a);
    h.onEnd(ended(a, 499, undefined)); // client left mid-stream: the 60 stay charged
    const b = request(key, { max_tokens: 50, model: 'out-model' });
    expect(await rejection(h.admit(b))).toMatchObject({ limitType: 'output' });
    const c = request(key, { max_tokens: 40, model: 'out-model' });
    await h.admit(c);
    h.onEnd(ended(c, 200, { promptTokens: 40, completionTokens: 10 })); // 30 of the 40 come back
    await h.admit(request(key, { max_tokens: 30, model: 'out-model' }));
  });

  /** Hooks with 100 output tokens an hour, and `/generate` requests for `model`. */
  const generateHooks = (model: string) => ({
    h: createAdmissionHooks(admission, { rateLimitFor: () => ({ outputTokensPerUnit: 100, unit: 'hour' }) }),
    generate: (body: Record<string, unknown>): RequestContext =>
      requestContext({ path: '/generate', headers: { authorization: `Bearer ${key}` }, body: { model, ...body }, inputTokens: 10 }),
  });

  it("reserves a /generate body's max_new_tokens over its batch and samples, not the route default", async () => {
    const { h, generate } = generateHooks('gen-model');
    // Two prompts × 15 tokens × n 2 = 60 reserved; a list of per-prompt params sums to 30: 90 in all.
    await h.admit(generate({ text: ['a', 'b'], sampling_params: { max_new_tokens: 15, n: 2 } }));
    await h.admit(generate({ input_ids: [[1], [2]], sampling_params: [{ max_new_tokens: 10 }, { max_new_tokens: 20 }] }));
    expect(await rejection(h.admit(generate({ text: 'c', sampling_params: { max_new_tokens: 11 } })))).toMatchObject({
      limitType: 'output',
    });
    await h.admit(generate({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 10 } }));
  });

  it('counts /generate prompts and samples as SGLang does: per-prompt params times n, text before input_ids, an empty batch', async () => {
    const { h, generate } = generateHooks('gen-edge-model');
    // (10 + 20) × n 2 = 60; the text string is the one prompt (SGLang ignores the input_ids beside it): 30; an empty
    // text list is a batch of none: 0. 90 in all.
    await h.admit(
      generate({
        text: ['a', 'b'],
        sampling_params: [
          { max_new_tokens: 10, n: 2 },
          { max_new_tokens: 20, n: 2 },
        ],
      }),
    );
    await h.admit(generate({ text: 'a', input_ids: [[1], [2], [3]], sampling_params: { max_new_tokens: 30 } }));
    await h.admit(generate({ text: [], sampling_params: { max_new_tokens: 50 } }));
    expect(await rejection(h.admit(generate({ text: 'c', sampling_params: { max_new_tokens: 11 } })))).toMatchObject({
      limitType: 'output',
    });
    await h.admit(generate({ text: 'c', sampling_params: { max_new_tokens: 10 } }));
  });

  it('reserves a /generate beam search for its beam_width beams per prompt, whatever its n', async () => {
    const { h, generate } = generateHooks('gen-beam-model');
    // Two prompts × 10 tokens × beam_width 4 = 80 (n 2 is how many of the 4 beams come back); SGLang decodes all 4.
    await h.admit(generate({ text: ['a', 'b'], sampling_params: { max_new_tokens: 10, n: 2, beam_width: 4 } }));
    expect(await rejection(h.admit(generate({ text: 'c', sampling_params: { max_new_tokens: 7, beam_width: 3 } })))).toMatchObject({
      limitType: 'output',
    });
    await h.admit(generate({ text: 'c', sampling_params: { max_new_tokens: 10, beam_width: 2 } }));
  });
});
