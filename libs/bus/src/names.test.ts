import { Buckets, Subjects, endpointKey, endpointKeyFilter, objectKey, parseEndpointKey, parseObjectKey } from './names';

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

describe('subject and bucket names', () => {
  it('are versioned, valid NATS names, and distinct', () => {
    const buckets = Object.values(Buckets);
    const subjects = Object.values(Subjects);
    expect(buckets.every((b) => /^triad_v1_[A-Za-z0-9_-]+$/.test(b))).toBe(true);
    expect(subjects.every((s) => /^triad\.v1(\.[a-z]+)+$/.test(s))).toBe(true);
    expect(new Set(buckets).size).toBe(buckets.length);
    expect(new Set(subjects).size).toBe(subjects.length);
    expect([Buckets.admission, Subjects.admissionLease, Buckets.podWatcherLease]).toEqual([
      'triad_v1_admission',
      'triad.v1.admission.lease',
      'triad_v1_podwatcher_lease',
    ]);
  });
});
