import { classify, entryMatches, globMatches, type AllowEntry } from './allow-list';
import { ABSENT, diffResults, type RequestResult } from './diff';
import type { Leg } from './normalise';

function leg(id: string, fields: Record<string, unknown>, extra: Partial<Leg> = {}): Leg {
  const stage = id.split('#')[0];
  return { id, stage, target: stage, method: 'POST', path: '/v1/chat/completions', status: 200, headers: {}, fields, answer: {}, ...extra };
}

function result(legs: Leg[], extra: Partial<RequestResult> = {}): RequestResult {
  return {
    case: 'text, long',
    client: { status: 200, complete: true },
    trace: { legs, order: legs.map((l) => l.stage), overlaps: [] },
    outcome: {},
    ...extra,
  };
}

describe('diffResults', () => {
  it('finds nothing between identical handlings', () => {
    const a = result([leg('P#1', { 'body.max_tokens': 1 }), leg('D#1', { 'body.max_tokens': 8 })], { outcome: { 'D.kvPullsReceived': 1 } });
    expect(diffResults(a, structuredClone(a))).toEqual([]);
  });

  it('names each differing field, header, answer field and outcome counter, with absent and null told apart', () => {
    const ref = result(
      [
        leg(
          'P#1',
          { 'body.kv_transfer_params.transfer_id': 'xfer-<id#1>', 'body.kv_transfer_params.remote_host': ABSENT },
          { headers: { 'x-data-parallel-rank': '0' } },
        ),
        leg('D#1', { 'body.stream': true }),
      ],
      { outcome: { 'D.kvPullsReceived': 1 } },
    );
    const triad = result(
      [
        leg('P#1', { 'body.kv_transfer_params.remote_host': null }, { answer: { 'kv_transfer_params.remote_port': 'P.port' } }),
        leg('D#1', { 'body.stream': true }),
      ],
      { outcome: { 'D.localPrefillFallbacks': 1 } },
    );
    const keys = Object.fromEntries(diffResults(ref, triad).map((d) => [d.key, [d.reference, d.triad]]));
    expect(keys).toEqual({
      'P#1.header.x-data-parallel-rank': ['0', ABSENT],
      'P#1.body.kv_transfer_params.transfer_id': ['xfer-<id#1>', ABSENT],
      'P#1.body.kv_transfer_params.remote_host': [ABSENT, null],
      'P#1.answer.kv_transfer_params.remote_port': [ABSENT, 'P.port'],
      'outcome.D.kvPullsReceived': [1, ABSENT],
      'outcome.D.localPrefillFallbacks': [ABSENT, 1],
    });
  });

  it('reports a leg only one router made once, not field by field, plus order, overlap and client status', () => {
    const ref = result([leg('P#1', { 'body.a': 1 }), leg('D#1', { 'body.a': 1 })], {
      trace: { legs: [leg('P#1', { 'body.a': 1 }), leg('D#1', { 'body.a': 1 })], order: ['D+P'], overlaps: ['D#1~P#1'] },
    });
    const triad = result([leg('D#1', { 'body.a': 1 })], { client: { status: 502, complete: false } });
    const diffs = diffResults(ref, triad);
    expect(diffs.map((d) => d.key)).toEqual(['client.status', 'client.complete', 'order', 'overlap:D#1~P#1', 'leg:P#1']);
    expect(diffs.find((d) => d.key === 'overlap:D#1~P#1')).toMatchObject({ reference: 'overlapping', triad: 'sequential' });
    expect(diffs.find((d) => d.key === 'leg:P#1')).toMatchObject({ reference: 'POST /v1/chat/completions', triad: ABSENT });
    expect(diffs.every((d) => d.case === 'text, long')).toBe(true);
  });
});

describe('allow-list', () => {
  it('matches globs over the whole text', () => {
    expect(globMatches('*.header.authorization', 'P#1.header.authorization')).toBe(true);
    expect(globMatches('*.header.authorization', 'P#1.header.authorization-x')).toBe(false);
    expect(globMatches('500 at ?, long', '500 at P, long')).toBe(true);
    expect(globMatches('P#1.body.a[0]', 'P#1.body.a[0]')).toBe(true);
    expect(globMatches('P#1.body.a[0]', 'P#1.body.a0')).toBe(false);
  });

  const auth: AllowEntry = { id: 'auth', reference: '*', case: '*', key: '*.header.authorization', triad: '(absent)', reason: 'r' };
  const short: AllowEntry = { id: 'short', reference: ['nixl-toy', 'mooncake'], case: 'text, short', key: ['order', 'leg:*'], reason: 'r' };
  const unused: AllowEntry = { id: 'unused', reference: 'mini_lb', case: '*', key: 'nothing', reason: 'r' };

  it("allows a difference only where reference, case, key and Triad's side all match", () => {
    const d = { case: 'text, long', key: 'D#1.header.authorization', reference: 'Bearer None', triad: ABSENT };
    expect(entryMatches(auth, 'mooncake', d)).toBe(true);
    expect(entryMatches(auth, 'mooncake', { ...d, triad: 'Bearer sk-1' })).toBe(false);
    expect(entryMatches(short, 'mini_lb', { ...d, case: 'text, short', key: 'order' })).toBe(false);
    expect(entryMatches(short, 'mooncake', { ...d, case: 'text, short', key: 'leg:P#1' })).toBe(true);
  });

  it('sorts differences into allowed and unexplained and lists entries that matched nothing for this reference', () => {
    const diffs = [
      { case: 'text, long', key: 'P#1.header.authorization', reference: 'Bearer None', triad: ABSENT },
      { case: 'text, short', key: 'order', reference: 'P,D', triad: 'D' },
      { case: 'text, long', key: 'P#1.body.kv_transfer_params.transfer_id', reference: 'xfer-<id#1>', triad: ABSENT },
    ];
    const out = classify('mooncake', diffs, [auth, short, unused]);
    expect(out.allowed.map((a) => a.entry.id)).toEqual(['auth', 'short']);
    expect(out.unexplained.map((d) => d.key)).toEqual(['P#1.body.kv_transfer_params.transfer_id']);
    // `unused` is for mini_lb only: not reported for mooncake.
    expect(out.unused).toEqual([]);
    expect(classify('mini_lb', [], [auth, short, unused]).unused.map((e) => e.id)).toEqual(['auth', 'unused']);
  });
});
