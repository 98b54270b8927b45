import { SchedulingRequestSchema } from './scheduling';
import { readSchedulingRequest } from './scheduling-read';
import { variantOf } from '../test/variant';

const full = {
  id: 'req-1',
  namespace: 'default',
  modelServer: 'epd',
  model: 'm',
  prefixHashes: ['a1', 'b2'],
  mediaItems: [
    { index: 0, key: 'k0', modality: 'image', bytes: 1024 },
    { index: 1, key: 'k1', modality: 'audio' },
  ],
  kvBlockHashes: ['00ff00ff00ff00ff'],
  session: 'conversation-7',
  inputTokens: 42,
  exclude: ['default/epd/pod-a'],
  explain: false,
};

/** One change of `full` per entry: a field removed, replaced or added, at the top level or in a media item. */
const variants: [string, Record<string, unknown>][] = [
  ['as is', {}],
  [
    'only the required fields',
    {
      prefixHashes: undefined,
      mediaItems: undefined,
      kvBlockHashes: undefined,
      session: undefined,
      inputTokens: undefined,
      exclude: undefined,
      explain: undefined,
    },
  ],
  ['empty id', { id: '' }],
  ['numeric id', { id: 7 }],
  ['no namespace', { namespace: undefined }],
  ['null model', { model: null }],
  ['empty strings allowed where the schema allows them', { namespace: '', modelServer: '', model: '' }],
  ['prefix hashes not an array', { prefixHashes: 'a1' }],
  ['a prefix hash not a string', { prefixHashes: ['a', 1] }],
  ['256 prefix hashes', { prefixHashes: Array.from({ length: 256 }, (_, i) => `h${i}`) }],
  ['257 prefix hashes', { prefixHashes: Array.from({ length: 257 }, (_, i) => `h${i}`) }],
  ['media items not an array', { mediaItems: {} }],
  ['65 media items', { mediaItems: Array.from({ length: 65 }, (_, i) => ({ index: i, key: `k${i}`, modality: 'image' })) }],
  ['64 media items', { mediaItems: Array.from({ length: 64 }, (_, i) => ({ index: i, key: `k${i}`, modality: 'image' })) }],
  ['media item with a negative index', { mediaItems: [{ index: -1, key: 'k', modality: 'image' }] }],
  ['media item with a fractional index', { mediaItems: [{ index: 0.5, key: 'k', modality: 'image' }] }],
  ['media item with an unsafe index', { mediaItems: [{ index: 2 ** 60, key: 'k', modality: 'image' }] }],
  ['media item with an empty key', { mediaItems: [{ index: 0, key: '', modality: 'image' }] }],
  ['media item of an unknown modality', { mediaItems: [{ index: 0, key: 'k', modality: 'text' }] }],
  ['media item with negative bytes', { mediaItems: [{ index: 0, key: 'k', modality: 'image', bytes: -1 }] }],
  ['media item with an unknown field', { mediaItems: [{ index: 0, key: 'k', modality: 'image', url: 'x' }] }],
  ['media item null', { mediaItems: [null] }],
  ['media item an array', { mediaItems: [[0, 'k', 'image']] }],
  ['kv block hashes with a number', { kvBlockHashes: [1] }],
  ['257 kv block hashes', { kvBlockHashes: Array.from({ length: 257 }, (_, i) => `k${i}`) }],
  ['empty session', { session: '' }],
  ['session of 256', { session: 's'.repeat(256) }],
  ['session of 257', { session: 's'.repeat(257) }],
  ['session of 256 UTF-16 units (128 emoji)', { session: '😀'.repeat(128) }],
  ['session a number', { session: 5 }],
  ['negative input tokens', { inputTokens: -1 }],
  ['fractional input tokens', { inputTokens: 1.5 }],
  ['input tokens a string', { inputTokens: '4' }],
  ['exclude with a number', { exclude: ['a', 2] }],
  ['exclude a string', { exclude: 'a' }],
  ['explain a string', { explain: 'yes' }],
  ['explain null', { explain: null }],
  ['an unknown field', { priority: 1 }],
];

function variant(change: Record<string, unknown>): Record<string, unknown> {
  return variantOf(full, change);
}

describe('readSchedulingRequest (the scheduler hot path) against SchedulingRequestSchema', () => {
  it.each(variants)('%s: reads what the schema accepts the way the schema does, and nothing it refuses', (_name, change) => {
    const parsed = SchedulingRequestSchema.safeParse(variant(change));
    const read = readSchedulingRequest(variant(change));
    if (!parsed.success) expect(read).toBeUndefined();
    // A request the fast path passes on to the schema (a field to drop) is still read by the schema: not compared.
    else if (read !== undefined) expect(read).toEqual(parsed.data);
  });

  it('reads every well-formed request itself (the schema runs only for what it refuses or must strip)', () => {
    expect(readSchedulingRequest(variant({}))).toEqual(full);
    expect(readSchedulingRequest({ id: 'r', namespace: 'n', modelServer: 's', model: 'm' })).toEqual({
      id: 'r',
      namespace: 'n',
      modelServer: 's',
      model: 'm',
      prefixHashes: [],
      mediaItems: [],
    });
    expect(readSchedulingRequest(variant({ priority: 1 }))).toBeUndefined();
    expect(readSchedulingRequest(null)).toBeUndefined();
    expect(readSchedulingRequest([full])).toBeUndefined();
  });

  it('fills no default into a request it refuses (the schema reads it as it came)', () => {
    const refused: Record<string, unknown> = { id: 'r', namespace: 'n', modelServer: 's', model: 'm', inputTokens: -1 };
    expect(readSchedulingRequest(refused)).toBeUndefined();
    expect(refused).not.toHaveProperty('prefixHashes');
  });
});
