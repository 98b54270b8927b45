import { AffinityBatchSchema } from './affinity';
import { readAffinityBatch } from './affinity-read';
import { variantOf } from '../test/variant';

const decode = {
  model: 'm',
  endpoint: 'default.epd.epd-d-0',
  role: 'decode',
  prefixHashes: ['a1', 'b2'],
  mediaKeys: ['k0'],
  session: 's-1',
};
const encode = { model: 'm', endpoint: 'default.epd.epd-e-0', role: 'encode', prefixHashes: [], mediaKeys: ['k0'] };
const full = { v: 1, origin: 'scheduler-0', records: [decode, encode] };

/** A change of the first record (index 0) of `full`. */
const record = (change: Record<string, unknown>): Record<string, unknown> => ({ records: [{ ...decode, ...change }, encode] });

/** One change of `full` per entry: a field removed, replaced or added, in the batch or a record. */
const variants: [string, Record<string, unknown>][] = [
  ['as is', {}],
  ['only the required fields', record({ prefixHashes: undefined, mediaKeys: undefined, session: undefined })],
  ['another schema version', { v: 2 }],
  ['version as a string', { v: '1' }],
  ['no origin', { origin: undefined }],
  ['empty origin', { origin: '' }],
  ['origin a number', { origin: 1 }],
  ['records not an array', { records: {} }],
  ['no records', { records: [] }],
  ['4096 records', { records: Array.from({ length: 4096 }, () => encode) }],
  ['4097 records', { records: Array.from({ length: 4097 }, () => encode) }],
  ['a record null', { records: [null] }],
  ['a record an array', { records: [[decode]] }],
  ['model a number', record({ model: 1 })],
  ['empty model (allowed)', record({ model: '' })],
  ['empty endpoint', record({ endpoint: '' })],
  ['no endpoint', record({ endpoint: undefined })],
  ['an unknown role', record({ role: 'embed' })],
  ['no role', record({ role: undefined })],
  ['prefix hashes not an array', record({ prefixHashes: 'a1' })],
  ['a prefix hash a number', record({ prefixHashes: ['a1', 2] })],
  ['256 prefix hashes', record({ prefixHashes: Array.from({ length: 256 }, (_, i) => `h${i}`) })],
  ['257 prefix hashes', record({ prefixHashes: Array.from({ length: 257 }, (_, i) => `h${i}`) })],
  ['64 media keys', record({ mediaKeys: Array.from({ length: 64 }, (_, i) => `k${i}`) })],
  ['65 media keys', record({ mediaKeys: Array.from({ length: 65 }, (_, i) => `k${i}`) })],
  ['a media key null', record({ mediaKeys: [null] })],
  ['session a number', record({ session: 7 })],
  ['empty session (allowed)', record({ session: '' })],
  ['an unknown record field', record({ weight: 1 })],
  ['an unknown batch field', { priority: 1 }],
];

function variant(change: Record<string, unknown>): Record<string, unknown> {
  return variantOf(full, change, 'records');
}

describe('readAffinityBatch (the affinity feed hot path) against AffinityBatchSchema', () => {
  it.each(variants)('%s: reads what the schema accepts the way the schema does, and nothing it refuses', (_name, change) => {
    const parsed = AffinityBatchSchema.safeParse(variant(change));
    const read = readAffinityBatch(variant(change));
    if (!parsed.success) expect(read).toBeUndefined();
    // A batch the fast path passes on to the schema (a field to drop) is still read by the schema: not compared.
    else if (read !== undefined) expect(read).toEqual(parsed.data);
  });

  it('reads every well-formed batch itself (the schema runs only for what it refuses or must strip), filling in the prefix hashes', () => {
    expect(readAffinityBatch(variant({}))).toEqual(full);
    expect(readAffinityBatch({ v: 1, origin: 'o', records: [{ model: 'm', endpoint: 'e', role: 'prefill' }] })).toEqual({
      v: 1,
      origin: 'o',
      records: [{ model: 'm', endpoint: 'e', role: 'prefill', prefixHashes: [] }],
    });
    expect(readAffinityBatch(variant({ priority: 1 }))).toBeUndefined();
    expect(readAffinityBatch(variant(record({ weight: 1 })))).toBeUndefined();
    expect(readAffinityBatch(null)).toBeUndefined();
    expect(readAffinityBatch([full])).toBeUndefined();
  });
});
