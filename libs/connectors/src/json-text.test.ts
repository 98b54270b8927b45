import { randomBootstrapRoom, serializeWith, topLevelValue } from './json-text';

describe('serializeWith', () => {
  it.each([
    {
      name: 'sets and drops keys without touching the input',
      body: { a: 1, b: 2, c: 3 },
      set: { b: 9 },
      drop: ['c'],
      raw: undefined,
      want: '{"a":1,"b":9}',
    },
    { name: 'skips undefined values in set', body: { a: 1 }, set: { b: undefined }, drop: undefined, raw: undefined, want: '{"a":1}' },
    {
      name: 'appends raw fields',
      body: { a: 1 },
      set: undefined,
      drop: undefined,
      raw: '"room":18446744073709551615',
      want: '{"a":1,"room":18446744073709551615}',
    },
    { name: 'appends raw fields to an empty object', body: {}, set: undefined, drop: undefined, raw: '"x":1', want: '{"x":1}' },
    {
      name: 'replaces, drops and appends around object values',
      body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'é "q"' }] }], stream: true, n: null, u: undefined },
      set: { stream: false, max_tokens: 1, opts: { a: [1] } },
      drop: ['n'],
      raw: '"kv_transfer_params":{"x":1}',
      want:
        '{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"é \\"q\\""}]}],"stream":false,"max_tokens":1,' +
        '"opts":{"a":[1]},"kv_transfer_params":{"x":1}}',
    },
  ])('$name', ({ body, set, drop, raw, want }) => {
    const before = JSON.stringify(body);
    expect(serializeWith(body, set, drop, raw)).toBe(want);
    // From per-key text (the legs of one body share it): the same bytes, the first time and from the fragments.
    const fragments = new Map<string, string | undefined>();
    expect(serializeWith(body, set, drop, raw, fragments)).toBe(want);
    expect(serializeWith(body, set, drop, raw, fragments)).toBe(want);
    expect(JSON.stringify(body)).toBe(before);
  });

  it('serializes an object value once for the legs that share fragments', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true };
    const fragments = new Map<string, string | undefined>();
    const prefill = serializeWith(body, { stream: false, max_tokens: 1 }, ['stream_options'], '"kv_transfer_params":{}', fragments);
    expect(fragments.get('messages')).toBe('[{"role":"user","content":"hi"}]');
    fragments.set('messages', '["from the fragments"]');
    const decode = serializeWith(body, undefined, undefined, undefined, fragments);
    expect(prefill).toBe('{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false,"max_tokens":1,"kv_transfer_params":{}}');
    expect(decode).toBe('{"model":"m","messages":["from the fragments"],"stream":true}');
  });
});

describe('topLevelValue', () => {
  it.each([
    {
      name: 'an object value, verbatim',
      text: '{"id":"x","kv_transfer_params":{"remote_block_ids":[1,2],"big":123456789012345678901}}',
      want: '{"remote_block_ids":[1,2],"big":123456789012345678901}',
    },
    { name: 'a key nested deeper is ignored', text: '{"choices":[{"kv_transfer_params":1}],"kv_transfer_params":null}', want: 'null' },
    {
      name: 'strings with braces and escaped quotes are skipped',
      text: '{"content":"a \\"kv_transfer_params\\": {","kv_transfer_params":{"a":"}"}}',
      want: '{"a":"}"}',
    },
    { name: 'whitespace around the value', text: '{ "a" : 1 , "kv_transfer_params" :  [1, 2] }', want: '[1, 2]' },
    { name: 'absent', text: '{"a":{"kv_transfer_params":1}}', want: undefined },
    { name: 'not an object', text: '[1]', want: undefined },
  ])('$name', ({ text, want }) => {
    expect(topLevelValue(text, 'kv_transfer_params')).toBe(want);
  });
});

describe('randomBootstrapRoom', () => {
  it('gives decimal integers in [0, 2^63-1], distinct, many above 2^53', () => {
    const rooms = Array.from({ length: 200 }, () => randomBootstrapRoom());
    for (const r of rooms) {
      expect(r).toMatch(/^\d+$/);
      expect(BigInt(r)).toBeLessThanOrEqual((1n << 63n) - 1n);
    }
    expect(new Set(rooms).size).toBe(rooms.length);
    expect(rooms.filter((r) => BigInt(r) > 1n << 53n).length).toBeGreaterThan(150);
  });
});
