import { randomBootstrapRoom, scalarJson, serializeWith, topLevelValue } from './json-text';
import { SeededRandom } from '@triad/testing/reliability';

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

  it('writes the same text from fragments as JSON.stringify of the copy, for generated bodies with every kind of value', () => {
    const random = new SeededRandom(33);
    const next = (n: number): number => random.int(n);
    const keys = ['model', 'stream', 'max_tokens', 'n', 'a"b', 'é', 'back\\slash', 'ctl\u0001', '', 'messages', 'kv_transfer_params'];
    const pick = <T>(list: readonly T[]): T => list[next(list.length)];
    let differing = 0;
    for (let round = 0; round < 5_000; round++) {
      const body: Record<string, unknown> = {};
      for (let k = next(6); k > 0; k--) body[pick(keys)] = pick(SCALARS.filter((v) => typeof v !== 'bigint'));
      if (next(2) === 0) body['messages'] = [{ role: 'user', content: pick(['hi', 'é', 'a"b']) }];
      const set: Record<string, unknown> | undefined =
        next(2) === 0 ? undefined : { [pick(keys)]: pick(SCALARS.filter((v) => typeof v !== 'bigint')) };
      const drop = next(2) === 0 ? undefined : [pick(keys)];
      const want = serializeWith(body, set, drop, undefined);
      if (serializeWith(body, set, drop, undefined, new Map()) !== want) differing++;
    }
    expect(differing).toBe(0);
  });
});

/** Values that are not objects, each kind JSON.stringify treats on its own (escapes, non-finite numbers, skipped, thrown). */
const SCALARS: readonly unknown[] = [
  '',
  'epd',
  'Describe the picture in one sentence, please.',
  'a"b',
  'back\\slash',
  'tab\there',
  'line\nbreak',
  '\u0000\u001f',
  '\u007f',
  'é',
  '\u2028\u2029',
  '\ud83d',
  '\ude00x',
  '\ud83d\ude00',
  '</script>',
  0,
  -0,
  1,
  -1.5,
  16,
  1e21,
  1e-7,
  5e-324,
  Number.MAX_SAFE_INTEGER + 2,
  NaN,
  Infinity,
  -Infinity,
  true,
  false,
  null,
  undefined,
  () => 1,
  Symbol('s'),
  10n,
];

describe('scalarJson', () => {
  it('writes what JSON.stringify writes for every kind of value that is not an object, and throws where it throws', () => {
    const outcome = (f: () => string | undefined): string => {
      try {
        return `ok ${String(f())}`;
      } catch (err) {
        return `throws ${(err as Error).constructor.name}`;
      }
    };
    // Short strings are checked by a loop, long ones (16 code units and more) by a regular expression: both kinds.
    const everyCodeUnit = Array.from({ length: 0x10000 }, (_, c) => [
      `a${String.fromCharCode(c)}z`,
      `${'a'.repeat(15)}${String.fromCharCode(c)}`,
    ]).flat();
    const differing: unknown[] = [];
    for (const value of [...SCALARS, ...everyCodeUnit]) {
      if (outcome(() => scalarJson(value)) !== outcome(() => JSON.stringify(value))) differing.push(value);
    }
    expect(differing).toEqual([]);
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
    { name: 'escaped backslashes before a closing quote', text: '{"a":"x\\\\","kv_transfer_params":1}', want: '1' },
    {
      name: 'an escaped quote after escaped backslashes',
      text: '{"a":"\\\\\\"kv_transfer_params\\":2","kv_transfer_params":3}',
      want: '3',
    },
    { name: 'a string that is never closed', text: '{"a":"x\\"', want: undefined },
  ])('$name', ({ text, want }) => {
    expect(topLevelValue(text, 'kv_transfer_params')).toBe(want);
  });

  it('finds what a scan of every character finds, over generated texts (escapes, nesting, cut short)', () => {
    // The reference: the scan this module made before strings were searched with indexOf.
    const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
    const skipString = (text: string, i: number): number => {
      let j = i + 1;
      for (;;) {
        const c = text.charCodeAt(j);
        if (Number.isNaN(c)) return text.length;
        if (c === 0x5c) j += 2;
        else if (c === 0x22) return j + 1;
        else j++;
      }
    };
    const skipValue = (text: string, i: number): number => {
      const first = text.charCodeAt(i);
      if (first === 0x22) return skipString(text, i);
      if (first === 0x7b || first === 0x5b) {
        let depth = 0;
        let j = i;
        while (j < text.length) {
          const c = text.charCodeAt(j);
          if (c === 0x22) {
            j = skipString(text, j);
            continue;
          }
          if (c === 0x7b || c === 0x5b) depth++;
          else if (c === 0x7d || c === 0x5d) {
            depth--;
            if (depth === 0) return j + 1;
          }
          j++;
        }
        return text.length;
      }
      let j = i;
      while (j < text.length) {
        const c = text.charCodeAt(j);
        if (c === 0x2c || c === 0x7d || c === 0x5d || isSpace(c)) break;
        j++;
      }
      return j;
    };
    const reference = (text: string, key: string): string | undefined => {
      let i = 0;
      while (i < text.length && isSpace(text.charCodeAt(i))) i++;
      if (text.charCodeAt(i) !== 0x7b) return undefined;
      i++;
      const quoted = `"${key}"`;
      while (i < text.length) {
        while (i < text.length && (isSpace(text.charCodeAt(i)) || text.charCodeAt(i) === 0x2c)) i++;
        if (text.charCodeAt(i) !== 0x22) return undefined;
        const keyEnd = skipString(text, i);
        const matches = keyEnd - i === quoted.length && text.startsWith(quoted, i);
        i = keyEnd;
        while (i < text.length && isSpace(text.charCodeAt(i))) i++;
        if (text.charCodeAt(i) !== 0x3a) return undefined;
        i++;
        while (i < text.length && isSpace(text.charCodeAt(i))) i++;
        const valueEnd = skipValue(text, i);
        if (matches) return text.slice(i, valueEnd);
        i = valueEnd;
      }
      return undefined;
    };
    // A small deterministic generator (no seed dependence between runs).
    let state = 12345;
    const next = (n: number) => {
      state = (Math.imul(state, 1103515245) + 12345) & 0x7fffffff;
      return state % n;
    };
    const pieces = ['a', '\\\\', '\\"', '}', '{', '[', ']', ':', ',', ' ', 'é'];
    const str = (): string => {
      let out = '"';
      for (let k = next(6); k > 0; k--) out += pieces[next(pieces.length)];
      return `${out}"`;
    };
    const keys = ['"k"', '"kv_transfer_params"', '"kv_transfer_params\\\\"', '"\\"kv_transfer_params"'];
    const value = (depth: number): string => {
      const kind = next(depth > 2 ? 3 : 5);
      if (kind === 0) return str();
      if (kind === 1) return next(2) === 0 ? '12' : 'null';
      if (kind === 2) return next(2) === 0 ? '[]' : ' true ';
      if (kind === 3) return `[${Array.from({ length: next(3) }, () => value(depth + 1)).join(',')}]`;
      return `{${Array.from({ length: next(3) }, () => `${keys[next(keys.length)]}:${value(depth + 1)}`).join(', ')}}`;
    };
    const junk = ['"', '\\\\', '{', '}', ']', ':', ',', 'x'];
    let differing = 0;
    let found = 0;
    for (let n = 0; n < 20_000; n++) {
      const members = Array.from({ length: 1 + next(4) }, () => `${keys[next(keys.length)]}:${value(0)}`);
      let text = `${next(8) === 0 ? ' ' : ''}{${members.join(',')}}`;
      // Some texts are cut short or get a stray character: what each scan makes of malformed input must agree too.
      const at = next(text.length);
      const roll = next(16);
      if (roll < 4) text = text.slice(0, at);
      else if (roll < 7) text = text.slice(0, at) + junk[next(junk.length)] + text.slice(at);
      const got = topLevelValue(text, 'kv_transfer_params');
      if (got !== reference(text, 'kv_transfer_params')) differing++;
      if (got !== undefined) found++;
    }
    expect(differing).toBe(0);
    // The texts reach the key often enough to compare values, not only "absent".
    expect(found).toBeGreaterThan(2_000);
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
