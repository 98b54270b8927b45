import { toOpenAiError } from '@triad/request';
import { engineErrorMessage, upstreamHttpError, upstreamTransportError } from './errors';

describe('engine leg errors', () => {
  it("names the stage, item and endpoint of an engine failure in the client's error message", () => {
    const err = upstreamHttpError({ stage: 'encode', endpoint: 'ns.ms.e0', item: 2, status: 503 }, 'busy');
    expect(JSON.parse(toOpenAiError(err).body).error.message).toBe('encode of item 2 on ns.ms.e0 failed with HTTP 503: busy');
    expect(err).toMatchObject({ stage: 'encode', endpoint: 'ns.ms.e0', item: 2, status: 503, retryable: true });
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
