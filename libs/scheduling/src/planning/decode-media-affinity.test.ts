import type { Decision, DecisionOrError, ModelServerRecord, SchedulingRequestInput } from '@triad/bus';
import { DisaggregationConfigSchema } from '../config/config-schema';
import { loadSchedulerConfig } from '../config/load-config';
import type { PickVerdict } from './pick-verdict';
import { createInTreeRegistry } from '../plugins/in-tree';
import { Scheduler } from '../scheduler';
import { InflightTracker } from '../state/inflight-tracker';
import { buildIndex, keyOf, modelServerRecord, schedulingRequest, type EndpointSpec } from '../testing';
import { TEST_NOW } from '../testing/clock';
import { mayPrefillOnDecode, shortcutsOf } from './disaggregation-plan';

// A decode pod behind a prefill pod receives KV, not images: it encodes a request's media only when the request
// skips its prefill leg. Its image affinity is scored only for a request that can (docs/scheduler.md, *Image
// affinity of decode pods*).

const decodes = ['d1', 'd2', 'd3', 'd4'];
const pdPods: EndpointSpec[] = [
  ...decodes.map((pod) => ({ pod, role: 'decode' as const, group: 'g1' })),
  { pod: 'p1', role: 'prefill', group: 'g1' },
];

function withSpec(ms: ModelServerRecord, patch: Partial<ModelServerRecord['spec']>): ModelServerRecord {
  return { ...ms, spec: { ...ms.spec, ...patch } };
}

/** vLLM PD whose KV connector relays kv_transfer_params: a decode pod may prefill a short request itself. */
const nixlPd = withSpec(modelServerRecord({ mode: 'pd' }), { kvConnector: { type: 'nixl' } });

function schedulerFor(pods: readonly EndpointSpec[], ms: ModelServerRecord, config: object = {}, picked?: PickVerdict[]): Scheduler {
  const loaded = loadSchedulerConfig(config, { registry: createInTreeRegistry() });
  if (!loaded.ok) throw new Error(loaded.reasons.join('\n'));
  return new Scheduler({
    index: buildIndex(pods, [ms]),
    tracker: new InflightTracker(),
    config: loaded.loaded,
    ...(picked ? { observer: { pluginTime: () => undefined, picked: (v: readonly PickVerdict[]) => picked.push(...v) } } : {}),
  });
}

function decide(s: Scheduler, req: Partial<SchedulingRequestInput>): Decision {
  const d: DecisionOrError = s.schedule(schedulingRequest({ explain: true, ...req }), TEST_NOW);
  if (!d.ok) throw new Error(`${d.code}: ${d.message}`);
  return d;
}

/** The encoder-cache score of each endpoint in the decision's `profile` run, by pod. */
function encoderCacheScores(d: Decision, profile: string): Record<string, number> {
  const run = d.explanation?.profiles.find((p) => p.profile === profile);
  if (!run) throw new Error(`no ${profile} run`);
  return Object.fromEntries(run.endpoints.map((e) => [e.key.slice(keyOf('').length), e.scores['encoder-cache'] ?? 0]));
}

const images = (...keys: string[]) => keys.map((key, index) => ({ index, key, modality: 'image' as const }));
const zeros = (pods: readonly string[]) => Object.fromEntries(pods.map((p) => [p, 0]));
const hashes = (n: number) => Array.from({ length: n }, (_, i) => i.toString(16).padStart(16, '0'));

describe('image affinity of decode pods', () => {
  it('a request that keeps its prefill leg gives the decode pods no image affinity; its prefill pod keeps it', () => {
    const picked: PickVerdict[] = [];
    // 100 text tokens + 576 for the image: more than the default 512 a decode pod prefills itself.
    const d = decide(schedulerFor(pdPods, nixlPd, {}, picked), { inputTokens: 100, mediaItems: images('u:a') });
    expect(d.attempts[0]?.prefill?.pod).toBe('p1');
    // Before, the image's rendezvous home among the decode pods scored 100 and decided the decode pick.
    expect(encoderCacheScores(d, 'decode')).toEqual(zeros(decodes));
    expect(encoderCacheScores(d, 'prefill')).toEqual({ p1: 100 });
    expect(picked.find((v) => v.profile === 'decode')?.decider).not.toBe('encoder-cache');
  });

  it('a request short enough to prefill on a decode pod gets the decode pods image affinity (its image has a home)', () => {
    const s = schedulerFor(pdPods, nixlPd, { disaggregation: { maxLocalPrefillTokens: 1000 } });
    const d = decide(s, { inputTokens: 100, mediaItems: images('u:a') });
    expect(d.disaggregation?.prefill).toBe('local');
    const scores = Object.values(encoderCacheScores(d, 'decode'));
    expect(scores.filter((v) => v === 100)).toHaveLength(1);
    expect(scores.filter((v) => v === 0)).toHaveLength(decodes.length - 1);
  });

  it('a decode pod holding the image scores it for a request that may prefill there, not for one that cannot', () => {
    const s = schedulerFor(pdPods, nixlPd, { disaggregation: { maxLocalPrefillTokens: 1000 } });
    const first = decide(s, { id: 'short', inputTokens: 100, mediaItems: images('u:a') });
    expect(first.disaggregation?.prefill).toBe('local');
    const holder = first.attempts[0]?.endpoint.pod;
    // 2,000 text tokens + 576 for the image: kept on the prefill pod whichever decode pod takes the KV.
    const long = decide(s, { id: 'long', inputTokens: 2000, mediaItems: images('u:a') });
    expect(long.attempts[0]?.prefill?.pod).toBe('p1');
    expect(encoderCacheScores(long, 'decode')).toEqual(zeros(decodes));
    const again = decide(s, { id: 'again', inputTokens: 120, mediaItems: images('u:a') });
    expect(encoderCacheScores(again, 'decode')).toEqual({ ...zeros(decodes), [holder]: 100 });
  });

  it('E→PD (no prefill pods): the decode pod consumes the encoder output and keeps its image affinity', () => {
    const ePd = withSpec(modelServerRecord({ mode: 'epd', prefill: false }), {
      kvConnector: { type: 'nixl' },
      ecConnector: { type: 'nixl', enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 1 },
    });
    const pods: EndpointSpec[] = [
      ...decodes.map((pod) => ({ pod, role: 'decode' as const, group: 'g1' })),
      { pod: 'e1', role: 'encode', group: 'g1' },
    ];
    const d = decide(schedulerFor(pods, ePd), { inputTokens: 4000, mediaItems: images('u:a') });
    expect(Object.values(encoderCacheScores(d, 'decode')).filter((v) => v === 100)).toHaveLength(1);
  });

  it('aggregated pools are unchanged: every pod encodes, so a long request still has its image home', () => {
    const pods: EndpointSpec[] = ['a1', 'a2', 'a3'].map((pod) => ({ pod }));
    const d = decide(schedulerFor(pods, modelServerRecord()), { inputTokens: 4000, mediaItems: images('u:a') });
    expect(Object.values(encoderCacheScores(d, 'aggregated')).filter((v) => v === 100)).toHaveLength(1);
  });
});

describe('mayPrefillOnDecode', () => {
  const config = (patch: object = {}) => DisaggregationConfigSchema.parse(patch);
  const served = shortcutsOf(nixlPd.spec, 'pd');
  const may = (req: Partial<SchedulingRequestInput>, patch: object = {}, shortcuts = served) =>
    mayPrefillOnDecode(schedulingRequest(req), config(patch), shortcuts, 64);

  it('counts each image at mediaTokensPerItem: one image alone is more than the default 512 tokens', () => {
    expect(may({ inputTokens: 300 })).toBe(true);
    expect(may({ inputTokens: 0, mediaItems: images('u:a') })).toBe(false);
    expect(may({ inputTokens: 100, mediaItems: images('u:a') }, { maxLocalPrefillTokens: 676 })).toBe(true);
    expect(may({ inputTokens: 100, mediaItems: images('u:a') }, { maxLocalPrefillTokens: 675 })).toBe(false);
    expect(may({ inputTokens: 100, mediaItems: images('u:a') }, { costs: { mediaTokensPerItem: 256 } })).toBe(true);
  });

  it('a long prompt qualifies when a decode pod could hold its hashed prefix (its images are never in it)', () => {
    // 120 blocks of 64 characters ≈ 1,920 tokens a decode pod may hold; 2,000 text + 576 image tokens leave 656.
    const req = { inputTokens: 2000, prefixHashes: hashes(120), mediaItems: images('u:a') };
    expect(may(req, { maxLocalPrefillTokens: 656 })).toBe(true);
    expect(may(req, { maxLocalPrefillTokens: 655 })).toBe(false);
    expect(may({ ...req, prefixHashes: hashes(60) }, { maxLocalPrefillTokens: 656 })).toBe(false);
  });

  it('never where the planner would keep the prefill leg anyway: size unknown, shortcut off or not served', () => {
    expect(may({})).toBe(false);
    expect(may({ inputTokens: 100 }, { skipPrefill: false })).toBe(false);
    expect(may({ inputTokens: 100 }, {}, shortcutsOf(modelServerRecord({ mode: 'pd' }).spec, 'pd'))).toBe(false);
    expect(may({ inputTokens: 100 }, {}, shortcutsOf(modelServerRecord({ mode: 'pd', engine: 'SGLang' }).spec, 'pd'))).toBe(false);
  });
});
