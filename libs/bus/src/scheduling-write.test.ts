import type { ScheduleBatchReply } from './scheduling';
import { scheduleReplyJson } from './scheduling-write';

const frozenRef = (pod: string, extra: Record<string, unknown> = {}) =>
  Object.freeze({ key: `default.epd.${pod}`, pod, ip: '10.0.0.12', port: 8000, ...extra });
const encode = frozenRef('enc-0');
const prefill = frozenRef('pre-0', {
  bootstrapPort: 8998,
  dpSize: 2,
  ecControlAddresses: Object.freeze(['tcp://10.0.0.13:5570', 'tcp://10.0.0.13:5571']),
  mooncake: Object.freeze({ flow: 'concurrent', engineIds: Object.freeze(['e0', 'e1']) }),
});
const decode = frozenRef('dec-0', { dpSize: 1 });

/** Replies of every shape the scheduler sends, and some it does not (what JSON.stringify does with them counts). */
const replies: [string, unknown][] = [
  [
    'an EPD decision',
    {
      v: 1,
      decisions: [
        {
          id: 'r1',
          ok: true,
          mode: 'epd',
          attempts: [{ endpoint: decode, prefill }],
          encoders: [{ item: 0, endpoint: encode, alternates: [prefill, decode], affinity: true }],
        },
      ],
    },
  ],
  [
    'failover attempts, a DP rank, a local stage, the decider',
    {
      v: 1,
      decisions: [
        {
          id: 'r2',
          ok: true,
          mode: 'epd',
          attempts: [{ endpoint: decode, prefill, consumerDpRank: 1 }, { endpoint: prefill }],
          encoders: [],
          disaggregation: {
            encode: 'local',
            prefill: 'remote',
            reason: 'no "encoder" ready\n',
            fallback: [{ stage: 'encode', reason: 'none_ready' }],
          },
          decidedBy: 'scheduler-0',
        },
      ],
    },
  ],
  [
    'an explanation',
    {
      v: 1,
      decisions: [
        {
          id: 'r3',
          ok: true,
          mode: 'aggregated',
          attempts: [{ endpoint: decode }],
          encoders: [],
          explanation: {
            profiles: [{ profile: 'aggregated', endpoints: [{ key: decode.key, scores: { 'prefix-cache': 12.5, load: 0 }, final: 1e-7 }] }],
          },
        },
      ],
    },
  ],
  [
    'errors among decisions',
    {
      v: 1,
      decisions: [
        { id: 'e1', ok: false, code: 'SCHED_NO_CANDIDATES', message: 'none ✓ "quoted"' },
        { id: 'ü', ok: true, mode: 'pd', attempts: [{ endpoint: decode, prefill: undefined }], encoders: [] },
      ],
    },
  ],
  ['no decisions', { v: 1, decisions: [] }],
  ['a batch error', { v: 1, error: { code: 'SCHED_BAD_REQUEST', message: 'invalid schedule batch: requests: Required' } }],
  [
    'strings to escape and numbers JSON writes its own way',
    {
      v: 1,
      decisions: [
        {
          id: 'quote " backslash \\ tab \t nul \u0000 del \u007f é 😀 lone \ud800',
          ok: true,
          mode: 'epd',
          attempts: [{ endpoint: decode, consumerDpRank: -0 }],
          encoders: [{ item: 1e21, endpoint: encode, alternates: [], affinity: false }],
          decidedBy: '',
          extra: [Number.NaN, Number.POSITIVE_INFINITY, -1.5e-7, 0.1 + 0.2, 2 ** 53],
          boxed: [Object('s'), Object(1), Object(true)],
          'key "quoted"': 1,
        },
        { id: 'e', ok: false, code: 'SCHED_NO_CANDIDATES', message: 'ünïcode\n' },
      ],
    },
  ],
  [
    'refs that are not frozen, undefined fields, holes, nulls, a toJSON',
    {
      v: 1,
      decisions: [
        {
          id: 'r4',
          ok: true,
          mode: 'epd',
          attempts: [{ endpoint: { key: 'k', pod: 'p', ip: '1.2.3.4', port: 1, dpSize: undefined } }],
          encoders: [
            { item: 0, endpoint: encode, alternates: [undefined, null, { key: 'x', pod: 'y', ip: 'z', port: 2 }], affinity: false },
          ],
          decidedBy: undefined,
        },
        // eslint-disable-next-line no-sparse-arrays
        [1, , 3],
        null,
        undefined,
        { toJSON: () => ({ id: 'from toJSON' }) },
      ],
      extra: { nested: [1, 'two', true, null] },
    },
  ],
];

describe('scheduleReplyJson', () => {
  it.each(replies)('writes %s as JSON.stringify does', (_name, reply) => {
    // Twice: the second time from the refs' kept text.
    expect(scheduleReplyJson(reply as ScheduleBatchReply)).toBe(JSON.stringify(reply));
    expect(scheduleReplyJson(reply as ScheduleBatchReply)).toBe(JSON.stringify(reply));
  });

  it('writes a ref that is not frozen as it is now, however often it was written before', () => {
    const ref = { key: 'default.epd.p', pod: 'p', ip: '10.0.0.1', port: 8000, ecControlAddresses: ['tcp://10.0.0.1:1'] };
    const shallow = Object.freeze({ key: 'default.epd.q', pod: 'q', ip: '10.0.0.2', port: 8000, ecControlAddresses: ['tcp://10.0.0.2:1'] });
    const reply = () => ({
      v: 1 as const,
      decisions: [{ id: 'r', ok: true as const, mode: 'epd' as const, attempts: [{ endpoint: ref, prefill: shallow }], encoders: [] }],
    });
    expect(scheduleReplyJson(reply())).toBe(JSON.stringify(reply()));
    ref.ip = '10.0.0.9';
    shallow.ecControlAddresses.push('tcp://10.0.0.2:2');
    const text = scheduleReplyJson(reply());
    expect(text).toBe(JSON.stringify(reply()));
    expect(text).toContain('10.0.0.9');
    expect(text).toContain('tcp://10.0.0.2:2');
  });
});
