import type { Pod } from '@triad/crd';
import { endpointRecord } from '../publish/records';
import { kvEventsOf } from './kv-events-annotations';
import { placePods } from './placement';

const pod = (annotations: Record<string, string>): Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', namespace: 'default', labels: { app: 'x' }, annotations },
  status: { phase: 'Running', podIP: '10.0.0.7', conditions: [{ type: 'Ready', status: 'True' }] },
});

describe('KV-event pod annotations', () => {
  it('name the event sockets on the endpoint record', () => {
    const ms = {
      apiVersion: 'networking.serving.volcano.sh/v1alpha1',
      kind: 'ModelServer',
      metadata: { name: 'ms', namespace: 'default' },
      spec: { inferenceEngine: 'vLLM', workloadSelector: { matchLabels: { app: 'x' } }, workloadPort: { port: 8000 } },
    } as unknown as Parameters<typeof placePods>[0];
    const [placement] = placePods(ms, [
      pod({
        'triad.io/kv-events-endpoint': 'tcp://*:5557',
        'triad.io/kv-events-replay-endpoint': ':5558',
        'triad.io/kv-events-ranks': '2',
      }),
    ]);
    expect(endpointRecord(placement, undefined, 1).kvEvents).toEqual({ endpoint: 'tcp://*:5557', replayEndpoint: ':5558', ranks: 2 });
    expect(endpointRecord(placePods(ms, [pod({})])[0], undefined, 1).kvEvents).toBeUndefined();
  });

  it('ignore malformed values and say which annotation was wrong', () => {
    const bad: string[] = [];
    expect(kvEventsOf(pod({ 'triad.io/kv-events-endpoint': 'http://x:1/y' }), (a) => bad.push(a))).toBeUndefined();
    expect(kvEventsOf(pod({ 'triad.io/kv-events-endpoint': '5557', 'triad.io/kv-events-ranks': 'many' }), (a) => bad.push(a))).toEqual({
      endpoint: '5557',
    });
    expect(bad).toEqual(['triad.io/kv-events-endpoint', 'triad.io/kv-events-ranks']);
  });
});
