import { endpointKey, endpointKeyFilter, objectKey, parseEndpointKey, parseObjectKey } from './names';

describe('KV key names', () => {
  it('round-trips names that contain dots', () => {
    const key = endpointKey('default', 'qwen.vl', 'qwen.vl-encode-0');
    expect(key).toBe('default.qwen_vl.qwen_vl-encode-0');
    expect(parseEndpointKey(key)).toEqual({ namespace: 'default', modelServer: 'qwen.vl', pod: 'qwen.vl-encode-0' });
    expect(parseObjectKey(objectKey('ns-1', 'a.b'))).toEqual({ namespace: 'ns-1', name: 'a.b' });
  });
  it('builds a per-ModelServer watch filter and rejects malformed keys', () => {
    expect(endpointKeyFilter('default', 'm.s')).toBe('default.m_s.>');
    expect(parseEndpointKey('a.b')).toBeUndefined();
    expect(parseEndpointKey('a..c')).toBeUndefined();
    expect(parseObjectKey('a.b.c')).toBeUndefined();
  });
});
