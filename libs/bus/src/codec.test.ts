import { decodeMessage, encodeMessage, encodeText } from './codec';
import { ScheduleBatchSchema, DecisionOrErrorSchema } from './scheduling';
import { DispatchBatchSchema } from './dispatch';

describe('message codec', () => {
  it('writes the bytes TextEncoder writes: ASCII, escapes, multi-byte characters, lone surrogates, long texts', () => {
    const encoder = new TextEncoder();
    for (const text of ['', '{"v":1}', '"\\u0000\\"\\\\"', 'héllo wörld ✓ 😀', 'lone \ud800 high, \udc00 low', 'x'.repeat(10_000) + '€']) {
      const bytes = encodeText(text);
      expect(bytes).toBeInstanceOf(Uint8Array);
      expect([...bytes]).toEqual([...encoder.encode(text)]);
    }
  });

  it('round-trips a schedule batch and applies defaults', () => {
    const bytes = encodeMessage(ScheduleBatchSchema, {
      v: 1,
      requests: [{ id: 'r1', namespace: 'default', modelServer: 'ms', model: 'm' }],
    });
    const decoded = decodeMessage(ScheduleBatchSchema, bytes);
    expect(decoded).toEqual({
      ok: true,
      value: { v: 1, requests: [{ id: 'r1', namespace: 'default', modelServer: 'ms', model: 'm', prefixHashes: [], mediaItems: [] }] },
    });
  });

  it('reports malformed JSON and schema violations with paths, never throwing', () => {
    expect(decodeMessage(ScheduleBatchSchema, '{not json')).toMatchObject({ ok: false, error: expect.stringContaining('not JSON') });
    const bad = decodeMessage(ScheduleBatchSchema, JSON.stringify({ v: 2, requests: [] }));
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toContain('v: Invalid input: expected 1');
    const wrongItem = decodeMessage(
      ScheduleBatchSchema,
      JSON.stringify({
        v: 1,
        requests: [{ id: 'x', namespace: 'n', modelServer: 'm', model: 'm', mediaItems: [{ index: -1, key: 'k', modality: 'image' }] }],
      }),
    );
    expect(!wrongItem.ok && wrongItem.error).toContain('requests[0].mediaItems[0].index');
  });

  it('discriminates decisions from decision errors', () => {
    const err = decodeMessage(DecisionOrErrorSchema, JSON.stringify({ id: 'a', ok: false, code: 'SCHED_NO_CANDIDATES', message: 'none' }));
    expect(err).toEqual({ ok: true, value: { id: 'a', ok: false, code: 'SCHED_NO_CANDIDATES', message: 'none' } });
    const noAttempts = decodeMessage(DecisionOrErrorSchema, JSON.stringify({ id: 'a', ok: true, mode: 'pd', attempts: [], encoders: [] }));
    expect(noAttempts.ok).toBe(false);
  });

  it('accepts dispatch batches with in-flight snapshots', () => {
    const msg = {
      v: 1 as const,
      gateway: 'gw-1',
      seq: 3,
      events: [{ type: 'start' as const, requestId: 'r', endpoint: 'default.ms.p', stage: 'decode' as const, at: 1 }],
      inflight: { 'default.ms.p': 1 },
    };
    expect(decodeMessage(DispatchBatchSchema, encodeMessage(DispatchBatchSchema, msg))).toEqual({ ok: true, value: msg });
  });
});
