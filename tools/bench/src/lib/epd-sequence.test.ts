import type { Decision } from '@triad/bus';
import { ConnectorRegistry } from '@triad/connectors';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { proxyRequest, serverProfile } from '@triad/request/testing';
import { EpdSequenceClient, type EpdStages } from './epd-sequence';
import { ForwardingRunner } from './forwarding-runner';

const REQUEST = { model: 'bench-model', text: 'Describe the picture.', imageUrl: 'https://example.com/bench/cat.png', maxTokens: 16 };

describe('EpdSequenceClient against vLLM engine-sims (NIXL EC, --enable-mm-embeds)', () => {
  const sims: SimEngineHandle[] = [];
  let e: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;
  let stages: EpdStages;

  beforeAll(async () => {
    const start = async (role: 'encode' | 'prefill' | 'decode') => {
      const sim = await startSimEngine({
        engine: 'vllm',
        role,
        model: REQUEST.model,
        latencyProfile: 'zero',
        enableMmEmbeds: true,
        ...(role !== 'decode' ? { ecConnector: 'nixl' as const } : {}),
      });
      sims.push(sim);
      return sim;
    };
    [e, p, d] = [await start('encode'), await start('prefill'), await start('decode')];
    stages = { encode: e.url, prefill: p.url, decode: d.url };
  });

  afterAll(async () => {
    await Promise.all(sims.map((s) => s.close()));
  });

  it('makes the prefill pull the encoder output and the decode pull the prefill KV on every request', async () => {
    const before = { e: e.counters(), p: p.counters(), d: d.counters() };
    const client = new EpdSequenceClient(stages, REQUEST);
    try {
      for (let i = 0; i < 4; i++) {
        const { times } = await client.send();
        expect(times.total).toBeCloseTo(times.encode + times.prefill + times.decode, 9);
      }
    } finally {
      client.close();
    }
    const delta = (sim: SimEngineHandle, was: Record<string, number>, name: string) => (sim.counters()[name] ?? 0) - (was[name] ?? 0);
    expect(delta(e, before.e, 'ecPullsServed')).toBe(4);
    expect(delta(p, before.p, 'ecPullsReceived')).toBe(4);
    expect(delta(p, before.p, 'localEncodes')).toBe(0);
    expect(delta(p, before.p, 'kvPullsServed')).toBe(4);
    expect(delta(d, before.d, 'kvPullsReceived')).toBe(4);
    expect(delta(d, before.d, 'localPrefillFallbacks')).toBe(0);
    expect(p.kvHeld().requests).toBe(0);
  });

  it('sends each stage the body the gateway’s vLLM EPD connector sends (only the KV handle differs)', async () => {
    const ref = (pod: string, sim: SimEngineHandle) => ({ key: `default.epd.${pod}`, pod, ip: sim.host, port: sim.port });
    const decision: Decision = {
      id: 'r',
      ok: true,
      mode: 'epd',
      attempts: [{ endpoint: ref('d', d), prefill: ref('p', p) }],
      encoders: [{ item: 0, endpoint: ref('e', e), alternates: [], affinity: false }],
    };
    const body = {
      model: REQUEST.model,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: REQUEST.text },
            { type: 'image_url', image_url: { url: REQUEST.imageUrl } },
          ],
        },
      ],
      max_tokens: REQUEST.maxTokens,
      stream: false,
    };
    // The bench's EPD ModelServer (gateway-stack.ts): NIXL KV, NIXL EC with the *_embeds rewrite.
    const server = serverProfile({
      name: 'epd',
      mode: 'epd',
      connector: 'vllm-epd',
      relayKvParams: true,
      ec: { connector: 'nixl', push: false, mmEmbeds: true, maxEncoderBatch: 16, reencodeAttempts: 1 },
    });
    const ctx = proxyRequest({ body, server, decision });
    const connector = new ConnectorRegistry().get('vllm-epd');
    const run = new ForwardingRunner();
    await connector.prepare?.(ctx, run);
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    const gateway = Object.fromEntries(run.legs.map((l) => [l.stage, JSON.parse(l.body) as Record<string, unknown>]));

    const client = new EpdSequenceClient(stages, REQUEST);
    let sent;
    try {
      sent = (await client.send()).bodies;
    } finally {
      client.close();
    }
    expect(run.legs.map((l) => [l.stage, l.status])).toEqual([
      ['encode', 200],
      ['prefill', 200],
      ['decode', 200],
    ]);
    expect(JSON.parse(sent.encode)).toEqual(gateway['encode']);
    expect(JSON.parse(sent.prefill)).toEqual(gateway['prefill']);
    expect(JSON.parse(sent.prefill)).toMatchObject({ messages: [{ content: [{ type: 'text' }, { type: 'image_embeds' }] }] });
    const { kv_transfer_params: kv, ...decode } = JSON.parse(sent.decode) as Record<string, unknown>;
    const { kv_transfer_params: gatewayKv, ...gatewayDecode } = gateway['decode'];
    expect(decode).toEqual(gatewayDecode);
    expect(Object.keys(kv as object).sort()).toEqual(Object.keys(gatewayKv as object).sort());
    expect(kv).toMatchObject({ do_remote_prefill: true, remote_port: p.port });
  });
});
