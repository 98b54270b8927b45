import { EngineHttpError } from '../http/engine-error';
import { bootstrapFieldsOf, canonicalRoom, rankOfRoom } from './bootstrap-fields';
import { rawTopLevelField } from './raw-json';

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

describe('bootstrapFieldsOf', () => {
  it('keeps every digit of a room beyond 2^53', () => {
    const raw = '{"bootstrap_host":"10.0.0.1","bootstrap_port":8998,"bootstrap_room":9007199254740993}';
    expect(bootstrapFieldsOf(
      raw, JSON.parse(raw) as Record<string, unknown>, 'decode',
    )).toEqual({ host: '10.0.0.1', port: 8998, room: '9007199254740993' });
  });

  it.each([
    ['no room', '{"bootstrap_host":"h","bootstrap_port":1}'],
    ['a null port', '{"bootstrap_host":"h","bootstrap_port":null,"bootstrap_room":1}'],
    ['a batch of rooms', '{"bootstrap_host":"h","bootstrap_port":1,"bootstrap_room":[1,2]}'],
  ])('rejects %s with 400', (_name, raw) => {
    expect(() => bootstrapFieldsOf(raw, JSON.parse(raw) as Record<string, unknown>, 'prefill')).toThrow(EngineHttpError);
  });

  it('maps a room to a DP rank by modulo, exactly', () => {
    expect(rankOfRoom('9223372036854775807', 4)).toBe(3);
    expect(rankOfRoom('9007199254740993', 2)).toBe(1);
  });
});
