import { EngineHttpError } from '../http/engine-error';
import { canonicalRoom, pdFieldsOf, rankOfRoom } from './bootstrap-fields';
import { rawArrayElements, rawTopLevelField } from './raw-json';

describe('rawTopLevelField', () => {
  it.each([
    ['{"a":1,"bootstrap_room":9223372036854775807}', '9223372036854775807'],
    ['{ "bootstrap_room" : 18446744073709551615 , "x": 2 }', '18446744073709551615'],
    ['{"messages":[{"content":"\\"bootstrap_room\\":1"}],"bootstrap_room":7}', '7'],
    ['{"nested":{"bootstrap_room":1},"bootstrap_room":"12"}', '"12"'],
    ['{"bootstrap_room":[1,2]}', '[1,2]'],
    ['{"other":1}', undefined],
    ['[1]', undefined],
  ])('reads %s', (text, expected) => {
    expect(rawTopLevelField(text, 'bootstrap_room')).toBe(expected);
  });
});

describe('canonicalRoom', () => {
  it.each([
    ['9223372036854775807', '9223372036854775807'],
    ['"42"', '42'],
    ['0', '0'],
    ['-1', undefined],
    ['1.5', undefined],
    ['1e3', undefined],
    ['18446744073709551616', undefined],
  ])('%s -> %s', (raw, expected) => {
    expect(canonicalRoom(raw)).toBe(expected);
  });
});

describe('rawArrayElements', () => {
  it('splits an array into raw element texts and leaves other values alone', () => {
    const elements = rawArrayElements('[9223372036854775807, 18446744073709551615,null,"7"]');
    expect(elements).toEqual(['9223372036854775807', '18446744073709551615', 'null', '"7"']);
    expect(rawArrayElements('[]')).toEqual([]);
    expect(rawArrayElements('12')).toBeUndefined();
  });
});

describe('pdFieldsOf', () => {
  const fields = (raw: string, size = 1, batched = false, samples = 1) =>
    pdFieldsOf(raw, JSON.parse(raw) as Record<string, unknown>, { size, batched, samples });

  it('keeps every digit of a room beyond 2^53', () => {
    expect(fields('{"bootstrap_host":"10.0.0.1","bootstrap_port":8998,"bootstrap_room":9007199254740993}')).toEqual({
      ok: true,
      items: [{ host: '10.0.0.1', port: 8998, room: '9007199254740993' }],
    });
  });

  it('takes a room list as given and expands a scalar room to room + i for a batch', () => {
    const list = fields('{"bootstrap_host":["a","b"],"bootstrap_port":8998,"bootstrap_room":[18446744073709551615,3]}', 2, true);
    expect(list).toEqual({
      ok: true,
      items: [
        { host: 'a', port: 8998, room: '18446744073709551615' },
        { host: 'b', port: 8998, room: '3' },
      ],
    });
    const scalar = fields('{"bootstrap_host":"h","bootstrap_port":[1,2,3],"bootstrap_room":9007199254740993}', 3, true);
    const rooms = scalar.ok && scalar.items.map((t) => [t.port, t.room]);
    expect(rooms).toEqual([
      [1, '9007199254740993'],
      [2, '9007199254740994'],
      [3, '9007199254740995'],
    ]);
  });

  it("accepts a list per sample with n > 1 (the first sample's entry stands for the prompt)", () => {
    const r = fields('{"bootstrap_host":"h","bootstrap_room":[5,5,5,6,6,6]}', 2, true, 3);
    expect(r.ok && r.items.map((t) => t.room)).toEqual(['5', '6']);
  });

  it('lets a null port and a missing host through (the servers fill in or fail later)', () => {
    const nulls = fields('{"bootstrap_port":null,"bootstrap_room":1}');
    expect(nulls).toEqual({ ok: true, items: [{ host: undefined, port: undefined, room: '1' }] });
  });

  it.each([
    ['no room', '{"bootstrap_host":"h","bootstrap_port":1}'],
    ['a null room', '{"bootstrap_host":"h","bootstrap_port":1,"bootstrap_room":null}'],
  ])('reports %s as a missing room (the scheduler aborts it)', (_name, raw) => {
    expect(fields(raw)).toEqual({ ok: false });
  });

  it.each([
    ['a room list longer than the batch', '{"bootstrap_room":[1,2,3]}', 2],
    ['a negative room', '{"bootstrap_room":-1}', 1],
    ['a port that is not an integer', '{"bootstrap_port":"8998","bootstrap_room":1}', 1],
  ])('rejects %s with 400', (_name, raw, size) => {
    expect(() => fields(raw, size, size > 1)).toThrow(EngineHttpError);
  });

  it('maps a room to a DP rank by modulo, exactly', () => {
    expect(rankOfRoom('9223372036854775807', 4)).toBe(3);
    expect(rankOfRoom('9007199254740993', 2)).toBe(1);
  });
});
