import type { AffinityRecord, Decision, DecisionOrError, ModelServerRecord, SchedulingRequestInput } from '@triad/bus';
import { loadSchedulerConfig } from '../config/load-config';
import type { EncoderCacheScorer } from '../plugins/encoder-cache/encoder-cache';
import { createInTreeRegistry } from '../plugins/in-tree';
import { Scheduler } from '../scheduler';
import { InflightTracker } from '../state/inflight-tracker';
import { buildIndex, keyOf, modelServerRecord, schedulingRequest, type EndpointSpec } from '../testing';
import { TEST_NOW } from '../testing/clock';

const pods: EndpointSpec[] = [
  { pod: 'd1', role: 'decode', group: 'g1' },
  { pod: 'p1', role: 'prefill', group: 'g1' },
  { pod: 'e1', role: 'encode', group: 'g1' },
  { pod: 'e2', role: 'encode', group: 'g1' },
];

function server(mode: 'pd' | 'epd', patch: Partial<ModelServerRecord['spec']> = {}, engine: 'vLLM' | 'SGLang' = 'vLLM'): ModelServerRecord {
  const ms = modelServerRecord({ mode, engine });
  return { ...ms, spec: { ...ms.spec, ...patch } };
}

function schedulerFor(ms: ModelServerRecord, config: object = {}, tracker = new InflightTracker()): Scheduler {
  const loaded = loadSchedulerConfig(config, { registry: createInTreeRegistry() });
  if (!loaded.ok) throw new Error(loaded.reasons.join('\n'));
  return new Scheduler({ index: buildIndex(pods, [ms]), tracker, config: loaded.loaded });
}

function ok(d: DecisionOrError): Decision {
  if (!d.ok) throw new Error(`${d.code}: ${d.message}`);
  return d;
}

const decide = (s: Scheduler, req: Partial<SchedulingRequestInput>): Decision => ok(s.schedule(schedulingRequest(req), TEST_NOW));
const images = (...keys: string[]) => keys.map((key, index) => ({ index, key, modality: 'image' as const }));
const nixlPd = server('pd', { kvConnector: { type: 'nixl' } });

describe('per-request disaggregation', () => {
  it('vLLM PD with a KV connector that relays kv_transfer_params: a short uncached prompt is prefilled on the decode pod', () => {
    const d = decide(schedulerFor(nixlPd), { inputTokens: 200 });
    expect(d.attempts).toEqual([{ endpoint: expect.objectContaining({ pod: 'd1' }) }]);
    expect(d.disaggregation).toMatchObject({ prefill: 'local' });
    expect(d.disaggregation?.reason).toContain('prefill on decode d1: 200 uncached tokens');
    expect(d.disaggregation?.predictedTtftMs).toBeUndefined();
  });

  it('a long prompt keeps its prefill pod, and the decision carries no disaggregation field', () => {
    const d = decide(schedulerFor(nixlPd), { inputTokens: 4000 });
    expect(d.attempts[0]?.prefill?.pod).toBe('p1');
    expect(d.disaggregation).toBeUndefined();
  });

  it('explains every choice with the predicted TTFT of each option', () => {
    const long = decide(schedulerFor(nixlPd), { inputTokens: 4000, explain: true });
    expect(long.explanation?.disaggregation?.reason).toContain('4000 uncached tokens on d1 > maxLocalPrefillTokens 512');
    expect(long.explanation?.disaggregation?.predictedTtftMs).toEqual({
      'remote-prefill': expect.any(Number),
      'local-prefill': expect.any(Number),
    });
    const short = decide(schedulerFor(nixlPd), { inputTokens: 100, explain: true });
    const t = short.explanation?.disaggregation?.predictedTtftMs ?? {};
    expect(t['local-prefill']).toBeLessThan(t['remote-prefill']);
    // The reply's JSON shows the fields in this order (the stages first, in the order the plan decides them).
    expect(Object.keys(long.explanation?.disaggregation ?? {})).toEqual(['prefill', 'reason', 'predictedTtftMs']);
    const epd = server('epd', { ecConnector: { type: 'nixl', enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 1 } });
    const split = decide(schedulerFor(epd, { disaggregation: { skipPrefill: false, localEncode: true } }), {
      inputTokens: 1200,
      mediaItems: images('u:a'),
      explain: true,
    });
    expect(Object.keys(split.explanation?.disaggregation ?? {})).toEqual(['prefill', 'encode', 'reason', 'predictedTtftMs']);
  });

  it('a follow-up turn whose history the decode pod holds is prefilled there', () => {
    const s = schedulerFor(nixlPd);
    const hashes = Array.from({ length: 120 }, (_, i) => i.toString(16).padStart(16, '0'));
    // 120 blocks of 64 characters ≈ 1,920 tokens: the first turn is too long for the decode pod.
    expect(decide(s, { id: 'turn1', inputTokens: 2000, prefixHashes: hashes }).attempts[0]?.prefill?.pod).toBe('p1');
    const next = decide(s, { id: 'turn2', inputTokens: 2200, prefixHashes: [...hashes, 'ff'.repeat(8)] });
    expect(next.disaggregation?.prefill).toBe('local');
    expect(next.disaggregation?.reason).toContain('280 uncached tokens');
  });

  it('a decode pod behind a prefill pod is not taught the images (it gets KV, not images); one that prefills is', () => {
    const learned: AffinityRecord[] = [];
    // An image counts 576 tokens: room for one on the decode pod.
    const loaded = loadSchedulerConfig({ disaggregation: { maxLocalPrefillTokens: 1000 } }, { registry: createInTreeRegistry() });
    if (!loaded.ok) throw new Error(loaded.reasons.join('; '));
    const s = new Scheduler({ index: buildIndex(pods, [nixlPd]), tracker: new InflightTracker(), config: loaded.loaded });
    s.onLearned = (r) => learned.push(r);
    const cache = loaded.loaded.plugins.get('encoder-cache') as EncoderCacheScorer;
    expect(decide(s, { id: 'short', inputTokens: 100, mediaItems: images('u:b') }).disaggregation?.prefill).toBe('local');
    expect(cache.holds(keyOf('d1'), 'u:b')).toBe(true);
    expect(learned.find((r) => r.role === 'decode')?.mediaKeys).toEqual(['u:b']);
    learned.length = 0;
    expect(decide(s, { id: 'long', inputTokens: 4000, mediaItems: images('u:a') }).attempts[0]?.prefill?.pod).toBe('p1');
    expect(cache.holds(keyOf('p1'), 'u:a')).toBe(true);
    expect(cache.holds(keyOf('d1'), 'u:a')).toBe(false);
    expect(learned.find((r) => r.role === 'decode')?.mediaKeys).toBeUndefined();
    expect(learned.find((r) => r.role === 'prefill')?.mediaKeys).toEqual(['u:a']);
  });

  it('never gives a prefill to a decode pod with requests waiting; a prefill pod busy with a long prompt makes it worth it', () => {
    const busyDecode = buildIndex(
      [
        { pod: 'd1', role: 'decode', group: 'g1', waiting: 2 },
        { pod: 'p1', role: 'prefill', group: 'g1' },
      ],
      [nixlPd],
    );
    const loaded = loadSchedulerConfig({}, { registry: createInTreeRegistry() });
    if (!loaded.ok) throw new Error(loaded.reasons.join('; '));
    const s = new Scheduler({ index: busyDecode, tracker: new InflightTracker(), config: loaded.loaded });
    const d = decide(s, { inputTokens: 100, explain: true });
    expect(d.attempts[0]?.prefill?.pod).toBe('p1');
    expect(d.explanation?.disaggregation?.reason).toContain('decode d1 has 2 request(s) waiting');
    // 1,000 uncached tokens exceed the bound on an idle prefill pod, not once p1 has a 30k-token prompt ahead.
    const tracker = new InflightTracker();
    const t = schedulerFor(nixlPd, { disaggregation: { maxLocalPrefillTokens: 2000 } }, tracker);
    tracker.applyEvent('gw', {
      type: 'start',
      requestId: 'long',
      endpoint: keyOf('p1'),
      stage: 'prefill',
      at: TEST_NOW,
      inputTokens: 30_000,
    });
    const busy = decide(t, { id: 'mid', inputTokens: 1000, explain: true });
    expect(busy.disaggregation?.prefill).toBe('local');
    expect(busy.explanation?.disaggregation?.predictedTtftMs?.['remote-prefill']).toBeGreaterThan(1500);
  });

  it('never skips where the engines cannot serve it, and says why', () => {
    const http = decide(schedulerFor(server('pd')), { inputTokens: 100, explain: true });
    expect(http.attempts[0]?.prefill?.pod).toBe('p1');
    expect(http.explanation?.disaggregation?.reason).toContain("KV connector 'http'");
    const sglang = decide(schedulerFor(server('pd', {}, 'SGLang')), { inputTokens: 100, explain: true });
    expect(sglang.attempts[0]?.prefill?.pod).toBe('p1');
    expect(sglang.explanation?.disaggregation?.reason).toContain('SGLang decode-only servers cannot prefill');
    const off = decide(schedulerFor(nixlPd, { disaggregation: { skipPrefill: false } }), { inputTokens: 100, explain: true });
    expect(off.attempts[0]?.prefill?.pod).toBe('p1');
    expect(off.explanation?.disaggregation?.reason).toContain('skipPrefill is off');
  });

  it('vLLM EPD: one uncached image is encoded by the prefill; three go to the encoders', () => {
    const epd = server('epd', { ecConnector: { type: 'nixl', enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 1 } });
    const s = schedulerFor(epd, { disaggregation: { skipPrefill: false, localEncode: true } });
    const one = decide(s, { id: 'one', inputTokens: 1200, mediaItems: images('u:a') });
    expect(one.encoders).toEqual([]);
    expect(one.attempts[0]?.prefill?.pod).toBe('p1');
    expect(one.disaggregation).toMatchObject({ encode: 'local' });
    expect(one.disaggregation?.reason).toContain('encode on p1: 1 of 1 item(s) not cached there');
    const three = decide(s, { id: 'three', inputTokens: 2000, mediaItems: images('u:x', 'u:y', 'u:z'), explain: true });
    expect(three.encoders.map((e) => e.item)).toEqual([0, 1, 2]);
    expect(three.explanation?.disaggregation?.reason).toContain('3 item(s) to encode > maxLocalEncodeItems 1');
    // p1 now holds u:x, u:y and u:z (the encoders handed them over): with one new image, one item is left to encode.
    const cached = decide(s, { id: 'cached', inputTokens: 2000, mediaItems: images('u:x', 'u:y', 'u:new') });
    expect(cached.encoders).toEqual([]);
    expect(cached.disaggregation?.reason).toContain('1 of 3 item(s) not cached there');
  });

  it('a busy encoder pool makes a second uncached image cheaper to encode on the prefill', () => {
    const tracker = new InflightTracker();
    const epd = server('epd');
    const s = schedulerFor(epd, { disaggregation: { skipPrefill: false, localEncode: true, maxLocalEncodeItems: 4 } }, tracker);
    expect(decide(s, { id: 'idle', inputTokens: 1500, mediaItems: images('u:a', 'u:b') }).encoders).toHaveLength(2);
    tracker.applyBatch({ v: 1, gateway: 'gw', seq: 0, events: [], inflight: { [keyOf('e1')]: 8, [keyOf('e2')]: 8 } }, TEST_NOW);
    const busy = decide(s, { id: 'busy', inputTokens: 1500, mediaItems: images('u:c', 'u:d') });
    expect(busy.encoders).toEqual([]);
    expect(busy.disaggregation?.encode).toBe('local');
  });

  it('never encodes locally with a Mooncake EC connector, large items or the switch off (the default)', () => {
    const mooncake = server('epd', { ecConnector: { type: 'mooncake', enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 1 } });
    const pushed = decide(schedulerFor(mooncake, { disaggregation: { skipPrefill: false, localEncode: true } }), {
      inputTokens: 1200,
      mediaItems: images('u:a'),
      explain: true,
    });
    expect(pushed.encoders).toHaveLength(1);
    expect(pushed.explanation?.disaggregation?.reason).toContain('Mooncake EC consumer');
    const big = decide(schedulerFor(server('epd'), { disaggregation: { skipPrefill: false, localEncode: true } }), {
      inputTokens: 1200,
      mediaItems: [{ index: 0, key: 'u:big', modality: 'image', bytes: 9_000_000 }],
      explain: true,
    });
    expect(big.encoders).toHaveLength(1);
    expect(big.explanation?.disaggregation?.reason).toContain('9000000 bytes > maxLocalEncodeBytes');
    const off = decide(schedulerFor(server('epd'), { disaggregation: { skipPrefill: false } }), {
      inputTokens: 1200,
      mediaItems: images('u:a'),
      explain: true,
    });
    expect(off.encoders).toHaveLength(1);
    expect(off.explanation?.disaggregation?.reason).toContain('localEncode is off');
  });

  it('vLLM EPD: a short request that skips its prefill is encoded on the decode pod, with no encoder leg', () => {
    // 300 text tokens + 576 for the image.
    const d = decide(schedulerFor(server('epd'), { disaggregation: { maxLocalPrefillTokens: 1024 } }), {
      inputTokens: 300,
      mediaItems: images('u:a'),
    });
    expect(d.attempts).toEqual([{ endpoint: expect.objectContaining({ pod: 'd1' }) }]);
    expect(d.encoders).toEqual([]);
    expect(d.disaggregation).toMatchObject({ prefill: 'local', encode: 'local' });
  });
  it('decides the same split whether or not its reason is written (explain), in PD and EPD, local and remote', () => {
    // The plan writes its reason and predicted TTFTs only when they are shown; these must not change the choice.
    const setups: [string, ModelServerRecord, object][] = [
      ['pd', nixlPd, {}],
      ['epd', server('epd'), { disaggregation: { maxLocalPrefillTokens: 1024, localEncode: true, maxLocalEncodeItems: 2 } }],
      ['epd, prefill kept', server('epd'), { disaggregation: { skipPrefill: false, localEncode: true, maxLocalEncodeItems: 2 } }],
    ];
    const requests: Partial<SchedulingRequestInput>[] = [];
    for (const inputTokens of [100, 300, 700, 4000])
      for (const media of [[], ['u:a'], ['u:a', 'u:b'], ['u:c', 'u:d', 'u:e']])
        requests.push({ id: `r${requests.length}`, inputTokens, mediaItems: images(...media), prefixHashes: [`h${inputTokens}`] });
    for (const [name, ms, config] of setups) {
      const plain = schedulerFor(ms, config);
      const explained = schedulerFor(ms, config);
      let locals = 0;
      for (const r of requests) {
        const a = decide(plain, r);
        const b = decide(explained, { ...r, explain: true });
        const split = b.explanation?.disaggregation;
        expect({ name, id: r.id, attempts: a.attempts, encoders: a.encoders }).toEqual({
          name,
          id: r.id,
          attempts: b.attempts,
          encoders: b.encoders,
        });
        expect(a.disaggregation?.prefill ?? 'remote').toBe(split?.prefill ?? 'remote');
        expect(a.disaggregation?.encode ?? 'remote').toBe(split?.encode ?? 'remote');
        // A split with a local stage carries the same reason as the explained one (without the predicted TTFTs).
        if (a.disaggregation !== undefined) {
          locals++;
          expect(a.disaggregation.reason).toBe(split?.reason);
          expect(a.disaggregation.reason).not.toBe('');
        }
      }
      // Every setup decides some requests each way.
      expect(locals).toBeGreaterThan(0);
      expect(locals).toBeLessThan(requests.length);
    }
  });
});
