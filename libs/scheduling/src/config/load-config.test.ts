import { createInTreeRegistry } from '../plugins/in-tree';
import { PrefixCacheScorer } from '../plugins/prefix-cache/prefix-cache';
import { defaultSchedulerConfig } from './default-config';
import { loadSchedulerConfig, type ConfigLoadResult } from './load-config';
import { prefixHashOptionsOf } from './prefix-hash-options';

const registry = createInTreeRegistry();
const load = (input: unknown, previous?: ConfigLoadResult): ConfigLoadResult =>
  loadSchedulerConfig(input, { registry, ...(previous?.ok ? { previous: previous.loaded } : {}) });
const reasons = (r: ConfigLoadResult): string => (r.ok ? '' : r.reasons.join('\n'));

describe('loadSchedulerConfig', () => {
  it('loads the default config, with the built-in profiles spelled out', () => {
    const r = load(defaultSchedulerConfig());
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.loaded.topN).toBe(5);
    const decode = r.loaded.profiles.decode;
    expect(decode.filters.map((f) => f.name)).toEqual(['stale-metrics', 'least-request']);
    expect(decode.scorers.map((s) => [s.scorer.name, s.weight])).toEqual([
      ['least-request', 1],
      ['gpu-usage', 1],
      ['least-latency', 1],
      ['prefix-cache', 1],
      ['session-affinity', 1],
      ['encoder-cache', 2],
      ['prefill-backlog', 1],
    ]);
    expect(decode.picker.name).toBe('max-score');
    expect(decode.hooks.map((h) => h.name)).toEqual(['prefix-cache', 'session-affinity', 'encoder-cache']);
    expect(r.loaded.profiles.encode.picker.name).toBe('encoder-affinity');
    // one instance shared by every profile that names it
    expect(r.loaded.profiles.prefill.scorers[3]?.scorer).toBe(decode.scorers[3]?.scorer);
  });

  it('treats an empty document as all defaults', () => {
    const r = load('');
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.loaded.profiles.aggregated.source).toBe('built-in');
  });

  it('loads a YAML file with named instances, weights and per-stage profiles', () => {
    const r = load(`
topN: 3
plugins:
  - {type: least-request, name: strict-queue, args: {maxWaitingRequests: 2}}
  - {type: kv-pressure, args: {threshold: 0.8}}
profiles:
  default:
    filters: [strict-queue, kv-pressure]
    scorers: [{plugin: strict-queue, weight: 2}, gpu-usage]
  encode:
    filters: [stale-metrics]
    scorers: [least-request]
`);
    expect(reasons(r)).toBe('');
    if (!r.ok) return;
    expect(r.loaded.topN).toBe(3);
    expect(r.loaded.profiles.prefill.source).toBe('profiles.default');
    expect(r.loaded.profiles.prefill.scorers.map((s) => [s.scorer.name, s.weight])).toEqual([
      ['strict-queue', 2],
      ['gpu-usage', 1],
    ]);
    expect(r.loaded.profiles.encode.picker.type).toBe('encoder-affinity');
  });

  it('lets a file with only plugins tune the args of the built-in profiles', () => {
    const r = load({ plugins: [{ type: 'prefix-cache', args: { blockSizeToHash: 32, topKMatches: 2 } }] });
    expect(reasons(r)).toBe('');
    if (!r.ok) return;
    const prefix = r.loaded.profiles.decode.scorers.find((s) => s.scorer.type === 'prefix-cache')?.scorer;
    expect(prefix).toBeInstanceOf(PrefixCacheScorer);
    expect((prefix as PrefixCacheScorer).params.topKMatches).toBe(2);
    expect(prefixHashOptionsOf(r.loaded)).toEqual({ blockSize: 32, maxBlocks: 128 });
  });

  it.each([
    { name: 'YAML syntax', input: 'topN: [1,', expected: /not valid YAML/ },
    { name: 'unknown top-level key', input: { topn: 3 }, expected: /\(root\): Unrecognized key: "topn"/ },
    { name: 'topN zero', input: { topN: 0 }, expected: /topN: / },
    {
      name: 'negative weight',
      input: { profiles: { default: { scorers: [{ plugin: 'gpu-usage', weight: -1 }] } } },
      expected: /profiles\.default\.scorers\[0\]\.weight: must be >= 0/,
    },
    {
      name: 'NaN weight',
      input: { profiles: { default: { scorers: [{ plugin: 'gpu-usage', weight: Number.NaN }] } } },
      expected: /weight/,
    },
    {
      name: 'unknown plugin type',
      input: { plugins: [{ type: 'no-such-scorer' }] },
      expected: /plugins\[0\]\.type: unknown plugin type 'no-such-scorer'/,
    },
    {
      name: 'undefined reference',
      input: { profiles: { decode: { filters: ['nope'] } } },
      expected: /profiles\.decode\.filters\[0\]: references undefined plugin 'nope'/,
    },
    {
      name: 'plugin in the wrong slot',
      input: { profiles: { decode: { filters: ['gpu-usage'] } } },
      expected: /profiles\.decode\.filters\[0\]: plugin 'gpu-usage' \(gpu-usage\) is not a filter/,
    },
    {
      name: 'picker that is not a picker',
      input: { profiles: { decode: { picker: 'least-request' } } },
      expected: /profiles\.decode\.picker: .* is not a picker/,
    },
    {
      name: 'duplicate names',
      input: { plugins: [{ type: 'gpu-usage' }, { type: 'gpu-usage' }] },
      expected: /plugins\[1\]\.name: duplicate plugin name 'gpu-usage'/,
    },
    {
      name: 'bad plugin args',
      input: { plugins: [{ type: 'least-request', args: { maxWaitingRequests: 0 } }] },
      expected: /plugins\[0\]\.args\.maxWaitingRequests/,
    },
    {
      name: 'unknown plugin arg',
      input: { plugins: [{ type: 'kv-pressure', args: { treshold: 0.5 } }] },
      expected: /plugins\[0\]\.args\.treshold: unknown argument \(did you mean 'threshold'\?\)/,
    },
    {
      name: 'kv threshold out of range',
      input: { plugins: [{ type: 'kv-pressure', args: { threshold: 1.5 } }] },
      expected: /plugins\[0\]\.args\.threshold/,
    },
    {
      name: 'encoder loadFactor below 1',
      input: { plugins: [{ type: 'encoder-affinity', args: { loadFactor: 0.5 } }] },
      expected: /plugins\[0\]\.args\.loadFactor/,
    },
  ])('rejects $name with a reason naming the field', ({ input, expected }) => {
    const r = load(input);
    expect(r.ok).toBe(false);
    expect(reasons(r)).toMatch(expected);
  });

  it('keeps plugin instances (and their state) across a reload when name, type and args are unchanged', () => {
    const first = load({ plugins: [{ type: 'prefix-cache' }, { type: 'least-request', args: { maxWaitingRequests: 5 } }] });
    const second = load(
      { topN: 2, plugins: [{ type: 'prefix-cache' }, { type: 'least-request', args: { maxWaitingRequests: 6 } }] },
      first,
    );
    expect(first.ok && second.ok).toBe(true);
    if (!first.ok || !second.ok) return;
    expect(second.loaded.plugins.get('prefix-cache')).toBe(first.loaded.plugins.get('prefix-cache'));
    expect(second.loaded.plugins.get('least-request')).not.toBe(first.loaded.plugins.get('least-request'));
    expect(second.loaded.fingerprint).not.toBe(first.loaded.fingerprint);
  });
});
