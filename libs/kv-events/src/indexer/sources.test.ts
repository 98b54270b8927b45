import { EndpointRecordSchema } from '@triad/bus';
import { sourcesOf } from './sources';

const record = (kvEvents: object, ip = '10.0.0.7') =>
  EndpointRecordSchema.parse({
    schemaVersion: 1,
    namespace: 'ns',
    modelServer: 'ms',
    pod: 'p',
    role: 'aggregated',
    ip,
    port: 8000,
    engine: 'vLLM',
    kvEvents,
    ready: true,
    models: ['m'],
    metrics: { running: 0, waiting: 0, kvCacheUsage: 0, scrapedAt: 0, stale: false },
    updatedAt: 0,
  });

describe('sourcesOf', () => {
  it('fills the pod IP into a bare port, an empty host or *, and offsets DP ranks', () => {
    expect(sourcesOf(record({ endpoint: '5557' }))).toEqual([
      { source: 'ns/p', pod: 'ns/p', endpoint: 'tcp://10.0.0.7:5557', replayEndpoint: undefined },
    ]);
    expect(
      sourcesOf(record({ endpoint: 'tcp://*:5557', replayEndpoint: ':5558', ranks: 2 })).map((s) => [
        s.source,
        s.endpoint,
        s.replayEndpoint,
      ]),
    ).toEqual([
      ['ns/p', 'tcp://10.0.0.7:5557', 'tcp://10.0.0.7:5558'],
      ['ns/p#1', 'tcp://10.0.0.7:5558', 'tcp://10.0.0.7:5559'],
    ]);
    expect(sourcesOf(record({ endpoint: 'tcp://engine.local:6000' }))[0]?.endpoint).toBe('tcp://engine.local:6000');
    expect(sourcesOf(record({ endpoint: '5557' }, 'fd00::7'))[0]?.endpoint).toBe('tcp://[fd00::7]:5557');
  });

  it('skips endpoints it cannot read', () => {
    expect(sourcesOf(record({ endpoint: 'ipc:///tmp/kv' }))).toEqual([]);
    expect(sourcesOf(record({ endpoint: 'tcp://*:70000' }))).toEqual([]);
  });
});
