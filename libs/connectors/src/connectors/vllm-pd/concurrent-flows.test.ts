import type { Decision, EndpointRef } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { UpstreamError } from '@triad/request';
import { proxyRequest, serverProfile } from '@triad/request/testing';
import { FakeLegRunner, engineError } from '../../testing';
import { VllmPdConnector } from '../vllm-pd-connector';

const mooncake = { flow: 'concurrent' as const, engineIds: ['engine-0', 'engine-1'] };
const prefill: EndpointRef = { key: 'default.pd.p-0', pod: 'p-0', ip: '10.0.0.1', port: 8000, bootstrapPort: 8998, mooncake };
const decode: EndpointRef = { key: 'default.pd.d-0', pod: 'd-0', ip: '10.0.0.2', port: 8000 };
const decode2: EndpointRef = { key: 'default.pd.d-1', pod: 'd-1', ip: '10.0.0.3', port: 8000 };
const decision: Decision = {
  id: 'r',
  ok: true,
  mode: 'pd',
  attempts: [
    { endpoint: decode, prefill },
    { endpoint: decode2, prefill },
  ],
  encoders: [],
};
const timeouts = { encodeMs: 1, prefillMs: 2, firstByteMs: 3, totalMs: 4 };
const kv = (type: 'mooncake' | 'nixl', extra: { mooncake?: 'auto' | 'vllm' | 'vllm-ascend'; push?: boolean } = {}) =>
  serverProfile({
    name: 'pd',
    mode: 'pd',
    connector: extra.push ? 'vllm-nixl-push' : `vllm-${type}`,
    relayKvParams: true,
    timeouts,
    kv: { type, mooncake: extra.mooncake ?? 'auto', push: extra.push ?? false },
  });
const body = { model: 'm', stream: true, messages: [{ role: 'user', content: 'a long prompt' }], max_tokens: 50 };
const connectFailure = (spec: { stage: 'decode'; endpoint: EndpointRef }) =>
  new UpstreamError(ErrorCode.UpstreamConnect, 'refused', { stage: spec.stage, endpoint: spec.endpoint.key, item: -1, status: 0 }, true);

describe("vLLM Mooncake: upstream vLLM's concurrent flow", () => {
  it('sends P and D at once: a fresh transfer_id, X-data-parallel-rank on P, the bootstrap address and that rank’s engine id on D', async () => {
    const connector = new VllmPdConnector('vllm-mooncake');
    const ranks: string[] = [];
    for (const id of ['m-1', 'm-2']) {
      const run = new FakeLegRunner();
      await connector.attempt(proxyRequest({ id, body, server: kv('mooncake'), decision }), decision.attempts[0], 0, run);
      expect(run.legs.map((l) => [l.spec.stage, l.mode, l.spec.requestId])).toEqual([
        ['prefill', 'buffered', id],
        ['decode', 'relay', id],
      ]);
      const [p, d] = run.legs;
      const rank = p.spec.headers?.['X-data-parallel-rank'] as string;
      ranks.push(rank);
      const transferId = (p.json()['kv_transfer_params'] as { transfer_id: string }).transfer_id;
      expect(transferId).toMatch(/^xfer-[0-9a-f-]{36}$/);
      expect(p.json()).toMatchObject({ stream: false, max_tokens: 1 });
      expect(p.json()['kv_transfer_params']).toEqual({ do_remote_decode: true, do_remote_prefill: false, transfer_id: transferId });
      expect(d.json()['kv_transfer_params']).toEqual({
        do_remote_decode: false,
        do_remote_prefill: true,
        remote_bootstrap_addr: 'http://10.0.0.1:8998',
        remote_engine_id: mooncake.engineIds[Number(rank)],
        transfer_id: transferId,
      });
      expect(d.json()).toMatchObject({ stream: true, max_tokens: 50 });
      expect(d.spec.headers).toBeUndefined();
    }
    // The prefill's DP ranks take turns, as vLLM's proxy cycles them.
    expect(ranks).toEqual(['0', '1']);
  });

  it('uses the sequential flow for vllm-ascend (by the probe or the ModelServer), and reports a prefill that returns no params', async () => {
    const ascend = { ...prefill, mooncake: { flow: 'sequential' as const } };
    for (const [server, p] of [
      [kv('mooncake'), ascend],
      [kv('mooncake', { mooncake: 'vllm-ascend' }), prefill],
    ] as const) {
      const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? { body: '{"kv_transfer_params":null}' } : {}));
      const d: Decision = { ...decision, attempts: [{ endpoint: decode, prefill: p }] };
      await new VllmPdConnector('vllm-mooncake').attempt(proxyRequest({ body, server, decision: d }), d.attempts[0], 0, run);
      expect(run.legs[0].json()['kv_transfer_params']).toMatchObject({ do_remote_decode: true, remote_engine_id: null });
      expect(run.legs[1].json()).not.toHaveProperty('kv_transfer_params');
      expect(run.paramsMissing).toEqual([p]);
    }
  });

  it('fails the try, retryably and before any leg, when the prefill has no engine ids yet', async () => {
    const bare = { ...prefill, mooncake: { flow: 'concurrent' as const, engineIds: [] } };
    const d: Decision = { ...decision, attempts: [{ endpoint: decode, prefill: bare }] };
    const run = new FakeLegRunner();
    await expect(
      new VllmPdConnector('vllm-mooncake').attempt(proxyRequest({ body, server: kv('mooncake'), decision: d }), d.attempts[0], 0, run),
    ).rejects.toMatchObject({ retryable: true, stage: 'prefill', message: expect.stringContaining('GET http://10.0.0.1:8998/query') });
    expect(run.legs).toEqual([]);
  });

  it('a prefill that fails before the decode’s first byte aborts the decode and fails the try with its error', async () => {
    const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? engineError(spec, 500, 'prefill crashed') : 'hang'));
    await expect(
      new VllmPdConnector('vllm-mooncake').attempt(proxyRequest({ body, server: kv('mooncake'), decision }), decision.attempts[0], 0, run),
    ).rejects.toMatchObject({ stage: 'prefill', status: 500, retryable: true });
    expect(run.legsOf('decode')[0].abortedWith).toMatchObject({ stage: 'prefill' });
    expect(run.stranded).toEqual([{ engine: 'vLLM', prefill, decode, failed: 'prefill', peerAborted: true }]);
    expect(run.answers).toEqual([]);
  });

  it('a non-streamed decode answer is buffered; a prefill failure before it arrives fails the try, nothing reaches the client', async () => {
    const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? engineError(spec, 503) : { body: '{"choices":[]}' }));
    const ctx = proxyRequest({ body: { ...body, stream: false }, server: kv('mooncake'), decision });
    await expect(new VllmPdConnector('vllm-mooncake').attempt(ctx, decision.attempts[0], 0, run)).rejects.toMatchObject({
      stage: 'prefill',
    });
    expect(run.legsOf('decode')[0].mode).toBe('buffered');
    expect(run.answers).toEqual([]);
    const ok = new FakeLegRunner((spec) => (spec.stage === 'decode' ? { body: '{"choices":[]}' } : {}));
    await new VllmPdConnector('vllm-mooncake').attempt(ctx, decision.attempts[0], 0, ok);
    expect(ok.answers).toEqual([{ via: 'respond', status: 200, body: '{"choices":[]}' }]);
  });

  it('a decode that never got the request leaves KV the prefill computed: a release; one that got it frees it itself', async () => {
    const unreachable = new FakeLegRunner((spec) => (spec.stage === 'decode' ? connectFailure(spec as never) : {}));
    await expect(
      new VllmPdConnector('vllm-mooncake').attempt(
        proxyRequest({ body, server: kv('mooncake'), decision }),
        decision.attempts[0],
        0,
        unreachable,
      ),
    ).rejects.toMatchObject({ stage: 'decode' });
    const [stranded] = unreachable.stranded;
    expect(stranded).toMatchObject({ failed: 'decode', peerAborted: false, release: { body } });
    expect(JSON.parse(stranded?.release?.kvParams as string)).toMatchObject({
      do_remote_prefill: true,
      remote_bootstrap_addr: 'http://10.0.0.1:8998',
    });
    const answered = new FakeLegRunner((spec) => (spec.stage === 'decode' ? engineError(spec, 500) : {}));
    await expect(
      new VllmPdConnector('vllm-mooncake').attempt(
        proxyRequest({ body, server: kv('mooncake'), decision }),
        decision.attempts[0],
        0,
        answered,
      ),
    ).rejects.toMatchObject({ stage: 'decode' });
    expect(answered.stranded).toEqual([{ engine: 'vLLM', prefill, decode, failed: 'decode', peerAborted: false }]);
  });
});

describe('vLLM NIXL push', () => {
  const plain = { key: 'default.pd.p-1', pod: 'p-1', ip: '10.0.0.9', port: 8000 };
  const pushDecision: Decision = { ...decision, attempts: [{ endpoint: decode, prefill: plain }] };
  const coords = (engineId: string) =>
    `{"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"${engineId}","remote_host":"10.0.0.9","remote_port":5600,` +
    `"tp_size":2,"pp_size":1,"remote_block_ids":[[1,2]],"transfer_mode":"push"}}`;

  it('is sequential until the prefill answered its coordinates, then sends P and D at once with them and one transfer id', async () => {
    const connector = new VllmPdConnector('vllm-nixl-push');
    const server = kv('nixl', { push: true });
    const first = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? { body: coords('e-1') } : {}));
    await connector.attempt(proxyRequest({ body, server, decision: pushDecision }), pushDecision.attempts[0], 0, first);
    expect(first.legs[1].json()['kv_transfer_params']).toMatchObject({ remote_block_ids: [[1, 2]], transfer_mode: 'push' });
    const second = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? { body: coords('e-2') } : {}));
    await connector.attempt(proxyRequest({ id: 'push-2', body, server, decision: pushDecision }), pushDecision.attempts[0], 0, second);
    const transferId = (second.legs[0].json()['kv_transfer_params'] as { transfer_id: string }).transfer_id;
    expect(second.legs[0].json()['kv_transfer_params']).toMatchObject({
      do_remote_decode: true,
      remote_block_ids: null,
      transfer_id: transferId,
    });
    expect(second.legs[1].json()['kv_transfer_params']).toEqual({
      do_remote_decode: false,
      do_remote_prefill: true,
      remote_engine_id: 'e-1',
      remote_host: '10.0.0.9',
      remote_port: 5600,
      tp_size: 2,
      pp_size: 1,
      remote_request_id: 'push-2',
      transfer_id: transferId,
    });
    // The prefill answered other coordinates (it restarted): the next try names those.
    const third = new FakeLegRunner();
    await connector.attempt(proxyRequest({ body, server, decision: pushDecision }), pushDecision.attempts[0], 0, third);
    expect(third.legs[1].json()['kv_transfer_params']).toMatchObject({ remote_engine_id: 'e-2' });
  });
});
