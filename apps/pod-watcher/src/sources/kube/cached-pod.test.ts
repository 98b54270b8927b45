import { isPodReady, validateResource } from '@triad/crd';
import { servedPod } from '@triad/testing/kube';
import { trimCachedPod } from './cached-pod';

describe('trimCachedPod', () => {
  const served = () =>
    servedPod('qwen-decode-0', {
      labels: { app: 'qwen', role: 'decode', group: 'g1' },
      annotations: { 'triad.io/bootstrap-port': '8998', 'kv-events.triad.io/endpoint': 'tcp://*:5557' },
      ip: '10.1.2.3',
    });

  it('keeps everything Triad reads of a pod as served: the validated pod is the same before and after', () => {
    const full = served();
    const before = validateResource(JSON.parse(JSON.stringify(full)));
    const trimmed = trimCachedPod(full);
    const after = validateResource(JSON.parse(JSON.stringify(trimmed)));
    expect(before.status).toBe('valid');
    // The same, but for the conditions other than Ready, which nothing reads.
    const pod = (v: typeof before) => (v.status === 'valid' ? v.value : undefined) as { status: { conditions: { type: string }[] } };
    pod(before).status.conditions = pod(before).status.conditions.filter((c) => c.type === 'Ready');
    expect(after).toEqual(before);
    expect(after.status === 'valid' && isPodReady(after.value as Parameters<typeof isPodReady>[0])).toBe(true);
  });

  it('changes the object in place (the informer caches this reference) and drops spec, managed fields, container statuses and conditions other than Ready', () => {
    const pod = served();
    const size = JSON.stringify(pod).length;
    expect(trimCachedPod(pod)).toBe(pod);
    const kept = JSON.parse(JSON.stringify(pod)) as Record<string, Record<string, unknown>>;
    expect(Object.keys(kept).sort()).toEqual(['apiVersion', 'kind', 'metadata', 'status']);
    expect(Object.keys(kept['metadata']).sort()).toEqual([
      'annotations',
      'creationTimestamp',
      'labels',
      'name',
      'namespace',
      'resourceVersion',
      'uid',
    ]);
    expect(kept['status']).toEqual({
      phase: 'Running',
      podIP: '10.1.2.3',
      conditions: [{ type: 'Ready', status: 'True' }],
    });
    expect(JSON.stringify(pod).length).toBeLessThan(size / 4);
    // Trimming again changes nothing.
    expect(JSON.parse(JSON.stringify(trimCachedPod(pod)))).toEqual(kept);
  });

  it('keeps a deletion mark and works on typed objects as client-node lists them (Date fields)', () => {
    const pod = served() as ReturnType<typeof served> & { metadata: { deletionTimestamp?: Date } };
    (pod.metadata as Record<string, unknown>)['creationTimestamp'] = new Date('2026-11-30T08:00:00Z');
    pod.metadata.deletionTimestamp = new Date('2026-12-01T00:00:00Z');
    // Plain data after trimming (what the source hands on without a JSON round trip): times as ISO strings.
    const plain = trimCachedPod(pod) as unknown as { metadata: Record<string, unknown> };
    expect(plain.metadata['deletionTimestamp']).toBe('2026-12-01T00:00:00.000Z');
    expect(plain.metadata['creationTimestamp']).toBe('2026-11-30T08:00:00.000Z');
    const v = validateResource({ ...plain });
    expect(v.status).toBe('valid');
    expect(v.status === 'valid' && isPodReady(v.value as Parameters<typeof isPodReady>[0])).toBe(false);
  });

  it('leaves a pod without status or metadata as it is', () => {
    const bare = { apiVersion: 'v1', kind: 'Pod' };
    expect(trimCachedPod(bare)).toEqual({ apiVersion: 'v1', kind: 'Pod' });
  });
});
