import type { Decision } from '@triad/bus';
import { proxyRequest, serverProfile } from '@triad/request/testing';
import { FakeLegRunner, engineError } from '../testing';
import { VllmPdConnector } from './vllm-pd-connector';

const prefill = { key: 'default.pd.p-0', pod: 'p-0', ip: '10.0.0.1', port: 8000 };
const decode = { key: 'default.pd.d-0', pod: 'd-0', ip: '10.0.0.2', port: 8000 };
const decision: Decision = { id: 'r', ok: true, mode: 'pd', attempts: [{ endpoint: decode, prefill }, { endpoint: decode }], encoders: [] };
const timeouts = { encodeMs: 1, prefillMs: 2, firstByteMs: 3, totalMs: 4 };
const nixl = serverProfile({ name: 'pd', mode: 'pd', connector: 'vllm-nixl', relayKvParams: true, timeouts });
const plain = serverProfile({ name: 'pd', mode: 'pd', connector: 'vllm-http', relayKvParams: false, timeouts });
const body = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 };
// Key order and number formatting as the engine sent them: the decode must get these bytes unchanged.
const KV =
  '{"remote_block_ids":[1,2,3],"remote_engine_id":"e-1","remote_host":"10.0.0.1","remote_port":5600,"do_remote_prefill":true,' +
  '"x":1.50}';

describe('VllmPdConnector', () => {
  it("prefills one token without stream, then sends decode the prefill's kv_transfer_params byte for byte", async () => {
    const ctx = proxyRequest({ id: 'pd-1', body, server: nixl, decision, injectUsage: true });
    const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? { body: `{"id":"x","kv_transfer_params":${KV},"usage":{}}` } : {}));
    await new VllmPdConnector('vllm-nixl').attempt(ctx, decision.attempts[0], 0, run);
    expect(run.legs.map((l) => [l.spec.stage, l.mode, l.spec.endpoint.key, l.spec.requestId, l.spec.timeoutMs])).toEqual([
      ['prefill', 'buffered', prefill.key, 'pd-1', 2],
      ['decode', 'relay', decode.key, 'pd-1', 3],
    ]);
    expect(run.legs[0].json()).toMatchObject({
      stream: false,
      max_tokens: 1,
      kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false },
    });
    expect(run.legs[0].json()).not.toHaveProperty('stream_options');
    expect(run.legs[1].spec.body).toContain(`"kv_transfer_params":${KV}`);
    expect(run.legs[1].json()).toMatchObject({ stream: true, max_tokens: 50, stream_options: { include_usage: true } });
  });

  it('relays no kv_transfer_params over plain http, nor when the prefill returned none or null', async () => {
    for (const [server, prefillBody] of [
      [plain, `{"kv_transfer_params":${KV}}`],
      [nixl, '{"kv_transfer_params":null}'],
      [nixl, '{}'],
    ] as const) {
      const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? { body: prefillBody } : {}));
      await new VllmPdConnector(server.connector).attempt(proxyRequest({ body, server, decision }), decision.attempts[0], 0, run);
      // Only the KV connectors ask the prefill to keep the blocks for a remote decode.
      expect(run.legs[0].json()['kv_transfer_params'] !== undefined).toBe(server.relayKvParams);
      expect(run.legsOf('decode')[0].json()).not.toHaveProperty('kv_transfer_params');
    }
  });

  it('goes straight to decode for an attempt without a prefill (E→PD)', async () => {
    const run = new FakeLegRunner();
    await new VllmPdConnector('vllm-nixl').attempt(proxyRequest({ body, server: nixl, decision }), decision.attempts[1], 1, run);
    expect(run.legs.map((l) => [l.spec.stage, l.spec.attempt])).toEqual([['decode', 1]]);
  });

  it("sends no decode when the prefill fails, and fails with the prefill's error", async () => {
    const run = new FakeLegRunner((spec) => engineError(spec, 500, 'prefill crashed'));
    await expect(
      new VllmPdConnector('vllm-nixl').attempt(proxyRequest({ body, server: nixl, decision }), decision.attempts[0], 0, run),
    ).rejects.toMatchObject({
      stage: 'prefill',
      endpoint: prefill.key,
      status: 500,
      retryable: true,
    });
    expect(run.legsOf('decode')).toEqual([]);
  });

  it('reports the hand-off as stranded, with what a release needs, when the decode fails before its first byte', async () => {
    const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? { body: `{"kv_transfer_params":${KV}}` } : engineError(spec, 500)));
    await expect(
      new VllmPdConnector('vllm-nixl').attempt(proxyRequest({ body, server: nixl, decision }), decision.attempts[0], 0, run),
    ).rejects.toMatchObject({ stage: 'decode', status: 500 });
    expect(run.stranded).toEqual([{ engine: 'vLLM', prefill, decode, failed: 'decode', release: { kvParams: KV, body } }]);
  });

  it('reports nothing when no KV was kept: a failed prefill, plain http, or a prefill that returned no params', async () => {
    const failedPrefill = new FakeLegRunner((spec) => engineError(spec, 500));
    await expect(
      new VllmPdConnector('vllm-nixl').attempt(proxyRequest({ body, server: nixl, decision }), decision.attempts[0], 0, failedPrefill),
    ).rejects.toMatchObject({ stage: 'prefill' });
    for (const [server, prefillBody] of [
      [plain, `{"kv_transfer_params":${KV}}`],
      [nixl, '{}'],
    ] as const) {
      const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? { body: prefillBody } : engineError(spec, 500)));
      await expect(
        new VllmPdConnector(server.connector).attempt(proxyRequest({ body, server, decision }), decision.attempts[0], 0, run),
      ).rejects.toMatchObject({ stage: 'decode' });
      expect(run.stranded).toEqual([]);
    }
    expect(failedPrefill.stranded).toEqual([]);
  });
});
