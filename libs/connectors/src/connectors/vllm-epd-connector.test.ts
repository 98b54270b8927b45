import type { Decision, EncoderChoice } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { SchedulingError } from '@triad/request';
import { proxyRequest, serverProfile } from '@triad/request/testing';
import { FakeLegRunner, engineError } from '../testing';
import { VllmEpdConnector } from './vllm-epd-connector';

const ep = (pod: string, n: number) => ({ key: `default.epd.${pod}`, pod, ip: `10.0.1.${n}`, port: 8000 });
const choice = (
  item: number, endpoint: EncoderChoice['endpoint'], ...alternates: EncoderChoice['endpoint'][]
): EncoderChoice => ({ item, endpoint, alternates, affinity: false });
const [e0, e1, e2, p0, d0] = [ep('e-0', 1), ep('e-1', 2), ep('e-2', 3), ep('p-0', 4), ep('d-0', 5)];
const server = serverProfile({
  name: 'epd', mode: 'epd', connector: 'vllm-epd', relayKvParams: true, retry: { retries: 5, intervalMs: 7 },
  timeouts: { encodeMs: 11, prefillMs: 12, firstByteMs: 13, totalMs: 14 },
});
const image = (url: string) => ({ type: 'image_url', image_url: { url } });
const body = {
  model: 'm', mm_processor_kwargs: { fps: 1 },
  messages: [{ role: 'user', content: [{ type: 'text', text: 'compare' }, image('https://i/a.png'), image('https://i/b.png')] }],
};
const decisionWith = (encoders: EncoderChoice[]): Decision => ({
  id: 'r', ok: true, mode: 'epd', attempts: [{ endpoint: d0, prefill: p0 }], encoders,
});

describe('VllmEpdConnector', () => {
  it('sends each media item alone to its encoder, concurrently, with parent:item:hex request ids; then P→D', async () => {
    const decision = decisionWith([choice(0, e0), choice(1, e1)]);
    const ctx = proxyRequest({ id: 'epd-1', body, server, decision });
    const started: string[] = [];
    // Item 0's encoder answers only once item 1's leg was sent too: the items run concurrently.
    const run = new FakeLegRunner(async (spec) => {
      started.push(spec.endpoint.pod);
      for (let i = 0; i < 100 && spec.item === 0 && started.length < 2; i++) await Promise.resolve();
      return started.length < 2 ? new Error('item 1 was not sent before item 0 was answered') : {};
    });
    const connector = new VllmEpdConnector();
    await connector.prepare(ctx, run);
    const encodes = run.legsOf('encode');
    expect(encodes.map((l) => [l.spec.item, l.spec.endpoint.key, l.mode, l.spec.path, l.spec.timeoutMs])).toEqual([
      [0, e0.key, 'buffered', '/v1/chat/completions', 11],
      [1, e1.key, 'buffered', '/v1/chat/completions', 11],
    ]);
    expect(encodes.map((l) => l.spec.requestId)).toEqual([
      expect.stringMatching(/^epd-1:0:[0-9a-f]{6}$/), expect.stringMatching(/^epd-1:1:[0-9a-f]{6}$/),
    ]);
    expect(encodes[1].json()).toEqual({
      model: 'm', messages: [{ role: 'user', content: [image('https://i/b.png')] }], max_tokens: 1, stream: false,
      mm_processor_kwargs: { fps: 1 },
    });
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    expect(run.legs.slice(2).map((l) => [l.spec.stage, l.spec.requestId])).toEqual([['prefill', 'epd-1'], ['decode', 'epd-1']]);
  });

  it('sends nothing to the encoders for a text-only request', async () => {
    const run = new FakeLegRunner();
    const text = { model: 'm', messages: [{ role: 'user', content: 'no media' }] };
    await new VllmEpdConnector().prepare(proxyRequest({ body: text, server, decision: decisionWith([]) }), run);
    expect(run.legs).toEqual([]);
  });

  it('retries a failed item on its own alternates, telling the observers, and fails at once on an engine 4xx', async () => {
    const decision = decisionWith([choice(0, e0), choice(1, e1, e2)]);
    const flaky = new FakeLegRunner((spec) => (spec.endpoint.key === e1.key ? engineError(spec, 503, 'busy') : {}));
    await new VllmEpdConnector().prepare(proxyRequest({ body, server, decision }), flaky);
    expect(flaky.legsOf('encode').map((l) => [l.spec.item, l.spec.endpoint.pod, l.spec.attempt])).toEqual([
      [0, 'e-0', 0], [1, 'e-1', 0], [1, 'e-2', 1],
    ]);
    expect(flaky.retries).toEqual([{ attempt: 0, error: expect.objectContaining({ stage: 'encode', item: 1, status: 503 }) }]);
    expect(flaky.pauses).toEqual([7]);

    const refused = new FakeLegRunner((spec) => (spec.item === 1 ? engineError(spec, 400, 'bad image') : {}));
    await expect(new VllmEpdConnector().prepare(proxyRequest({ body, server, decision }), refused)).rejects.toMatchObject({
      code: ErrorCode.UpstreamError, stage: 'encode', item: 1, status: 400,
      message: expect.stringContaining('encode of item 1 on default.epd.e-1'),
    });
    expect(refused.legsOf('encode').filter((l) => l.spec.item === 1)).toHaveLength(1);
    expect(refused.retries).toEqual([]);
  });

  it('fails naming the item when the decision chose no encoder for it', async () => {
    const err = await new VllmEpdConnector().prepare(
      proxyRequest({ body, server, decision: decisionWith([choice(0, e0)]) }), new FakeLegRunner(),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchedulingError);
    expect(err).toMatchObject({ code: ErrorCode.SchedNoEncoder, stage: 'encode', item: 1 });
  });
});
