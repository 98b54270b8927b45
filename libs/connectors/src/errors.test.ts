import { PathNotServedError, toOpenAiError } from '@triad/request';
import { engineErrorMessage, upstreamHttpError, upstreamTransportError } from './errors';

describe('engine leg errors', () => {
  it('names the stage, item and endpoint of an engine failure for the logs, and only the stage and item to the client', () => {
    const err = upstreamHttpError({ stage: 'encode', endpoint: 'ns.ms.e0', item: 2, status: 503 }, 'busy');
    expect(err.message).toBe('encode of item 2 on ns.ms.e0 failed with HTTP 503: busy');
    expect(JSON.parse(toOpenAiError(err).body).error.message).toBe('encode of item 2 failed with HTTP 503: busy');
    expect(err).toMatchObject({ stage: 'encode', endpoint: 'ns.ms.e0', item: 2, status: 503, retryable: true });
  });

  it("tells a client a refused connection by its code, never the engine's address", () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:8000'), { code: 'ECONNREFUSED' });
    const err = upstreamTransportError({ stage: 'prefill', endpoint: 'ns.ms.p0', item: -1, status: 0 }, refused);
    expect(err.message).toBe('prefill on ns.ms.p0 failed: connect ECONNREFUSED 10.1.2.3:8000');
    expect(JSON.parse(toOpenAiError(err).body).error.message).toBe('prefill failed: the connection was refused');
  });

  it("takes FastAPI's bare 404 for a path the engine has no route for: not retried, a not-found of its own", () => {
    const at = { stage: 'aggregated' as const, endpoint: 'ns.ms.a0', item: -1, status: 404 };
    const err = upstreamHttpError(at, 'Not Found');
    expect(err).toBeInstanceOf(PathNotServedError);
    expect(err).toMatchObject({ code: 'GATEWAY_PATH_NOT_FOUND', retryable: false, status: 404, endpoint: 'ns.ms.a0' });
    const answer = toOpenAiError(err, { method: 'POST', path: '/v1/embeddings', model: 'chat' });
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body).error.message).toMatch(/^POST \/v1\/embeddings is not served by the engines of model 'chat'/);
    // vLLM's own 404s say what is missing: those stay engine errors with their message.
    const own = upstreamHttpError(at, "Response with id 'resp_1' not found.");
    expect(own).not.toBeInstanceOf(PathNotServedError);
    expect(JSON.parse(toOpenAiError(own).body).error).toMatchObject({
      code: 'GATEWAY_UPSTREAM_ERROR',
      message: "aggregated failed with HTTP 404: Response with id 'resp_1' not found.",
    });
  });

  it('retries 5xx, 429 and transport failures, not other engine 4xx', () => {
    const at = { stage: 'decode' as const, endpoint: 'e', item: -1, status: 0 };
    expect([500, 429, 400, 404].map((status) => upstreamHttpError({ ...at, status }, 'x').retryable)).toEqual([true, true, false, false]);
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    expect(upstreamTransportError(at, refused)).toMatchObject({ code: 'GATEWAY_UPSTREAM_CONNECT', retryable: true, cause: refused });
    expect(upstreamTransportError(at, new Error('other side closed'))).toMatchObject({ code: 'GATEWAY_UPSTREAM_ERROR', retryable: true });
  });

  it("reads the engine's message from the error bodies vLLM, SGLang and FastAPI send", () => {
    expect(engineErrorMessage(Buffer.from('{"error":{"message":"too long","type":"BadRequestError"}}'))).toBe('too long');
    expect(engineErrorMessage(Buffer.from('{"error":"flat"}'))).toBe('flat');
    expect(engineErrorMessage(Buffer.from('{"object":"error","message":"sglang says"}'))).toBe('sglang says');
    expect(engineErrorMessage(Buffer.from('{"detail":[{"loc":["body"]}]}'))).toBe('[{"loc":["body"]}]');
    expect(engineErrorMessage(Buffer.from(' plain text '))).toBe('plain text');
    expect(engineErrorMessage(Buffer.alloc(0))).toBe('empty body');
  });
});
