import { LenientScheduleBatchSchema, readScheduleBatch } from '../src/service/schedule-handler';

const request = { id: 'r', namespace: 'n', modelServer: 's', model: 'm' };

describe('readScheduleBatch (the batch envelope on the hot path) against LenientScheduleBatchSchema', () => {
  it.each<[string, unknown]>([
    ['one request', { v: 1, requests: [request] }],
    ['256 requests', { v: 1, requests: Array.from({ length: 256 }, () => request) }],
    ['257 requests', { v: 1, requests: Array.from({ length: 257 }, () => request) }],
    ['no request', { v: 1, requests: [] }],
    ['requests not an array', { v: 1, requests: 'nope' }],
    ['another version', { v: 2, requests: [request] }],
    ['a version as text', { v: '1', requests: [request] }],
    ['no version', { requests: [request] }],
    ['an unknown field', { v: 1, requests: [request], extra: true }],
    ['a malformed request inside (each request is checked on its own)', { v: 1, requests: [{ id: 7 }] }],
    ['null', null],
    ['an array', [{ v: 1, requests: [request] }]],
  ])('%s: read as the schema reads it, or left to the schema', (_name, raw) => {
    const parsed = LenientScheduleBatchSchema.safeParse(raw);
    const read = readScheduleBatch(raw);
    if (!parsed.success) expect(read).toBeUndefined();
    else if (read !== undefined) expect(read).toEqual(parsed.data);
  });

  it('reads a well-formed batch itself', () => {
    expect(readScheduleBatch({ v: 1, requests: [request] })).toEqual({ v: 1, requests: [request] });
  });
});
