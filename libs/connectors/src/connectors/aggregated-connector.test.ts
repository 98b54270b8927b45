import type { Decision } from '@triad/bus';
import { proxyRequest, serverProfile } from '@triad/request/testing';
import { FakeLegRunner, engineError } from '../testing';
import { AggregatedConnector } from './aggregated-connector';

const endpoint = { key: 'default.agg.a-0', pod: 'a-0', ip: '10.0.0.1', port: 8000 };
const decision: Decision = { id: 'r', ok: true, mode: 'aggregated', attempts: [{ endpoint }], encoders: [] };
const server = serverProfile({ name: 'agg', timeouts: { encodeMs: 1, prefillMs: 2, firstByteMs: 3, totalMs: 4 } });

describe('AggregatedConnector', () => {
  it('sends the body, with usage injected for a stream, to the chosen endpoint and relays the answer', async () => {
    const body = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] };
    const ctx = proxyRequest({ id: 'agg-1', body, server, decision, injectUsage: true });
    const run = new FakeLegRunner(() => ({ contentType: 'text/event-stream', body: 'data: [DONE]\n\n' }));
    await new AggregatedConnector().attempt(ctx, decision.attempts[0], 0, run);
    expect(run.legs).toHaveLength(1);
    const [leg] = run.legs;
    expect(leg.mode).toBe('relay');
    expect(leg.spec).toMatchObject({ stage: 'aggregated', endpoint, item: -1, attempt: 0, requestId: 'agg-1', timeoutMs: 3 });
    expect(leg.json()).toEqual({ ...body, stream_options: { include_usage: true } });
    expect(run.answers).toEqual([{ via: 'relay', status: 200, body: 'data: [DONE]\n\n' }]);
  });

  it("sends a non-stream body as the client wrote it and fails with the engine's error", async () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 };
    const ctx = proxyRequest({ body, server, decision });
    const run = new FakeLegRunner((spec) => engineError(spec, 503, 'overloaded'));
    await expect(new AggregatedConnector().attempt(ctx, decision.attempts[0], 0, run)).rejects.toMatchObject({
      code: 'GATEWAY_UPSTREAM_ERROR',
      stage: 'aggregated',
      status: 503,
      retryable: true,
    });
    expect(run.legs[0].json()).toEqual(body);
    expect(run.answers).toEqual([]);
  });
});
