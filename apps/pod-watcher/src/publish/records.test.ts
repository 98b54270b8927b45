import { EndpointRecordSchema } from '@triad/bus';
import type { Placement } from '../topology/placement';
import { bootstrapQueryUrl, endpointRecord, sameEndpointRecord } from './records';

const placement: Placement = {
  key: 'default.ms.p',
  namespace: 'default',
  modelServer: 'ms',
  pod: 'p',
  role: 'prefill',
  group: 'g',
  ip: '10.0.0.1',
  port: 8000,
  bootstrapPort: 8998,
  engine: 'SGLang',
  mode: 'pd',
};
const view = (running: number, scrapedAt: number, stale = false) => ({
  metrics: { running, waiting: 0, kvCacheUsage: 0.1, scrapedAt, stale, ...(stale ? { lastError: 'x' } : {}) },
  models: ['m', 'lora'],
});

describe('endpoint records', () => {
  it('carry the schema version, the placement and the scrape view, and validate against the bus schema', () => {
    const r = endpointRecord(placement, view(2, 1000), 5);
    expect(EndpointRecordSchema.parse(r)).toEqual(r);
    expect(r).toMatchObject({
      schemaVersion: 1,
      role: 'prefill',
      group: 'g',
      bootstrapPort: 8998,
      ready: true,
      models: ['m', 'lora'],
      updatedAt: 5,
    });
    expect(endpointRecord(placement, undefined, 5).metrics).toEqual({
      running: 0,
      waiting: 0,
      kvCacheUsage: 0,
      scrapedAt: 0,
      stale: false,
    });
  });

  it('take the bootstrap port and DP size a SGLang prefill reports in /server_info over the static port', () => {
    const info = (disaggregationMode: string) => ({ ...view(0, 1), serverInfo: { disaggregationMode, bootstrapPort: 9100, dpSize: 4 } });
    expect(endpointRecord(placement, info('prefill'), 5)).toMatchObject({ bootstrapPort: 9100, dpSize: 4 });
    // A server not in prefill mode listens on no bootstrap port, whatever its server args say.
    expect(endpointRecord(placement, info('null'), 5)).toMatchObject({ bootstrapPort: 8998, dpSize: 4 });
    expect(endpointRecord({ ...placement, role: 'decode', bootstrapPort: undefined }, info('decode'), 5).bootstrapPort).toBeUndefined();
  });

  it("carry a vLLM consumer's DP size and EC control addresses from its placement", () => {
    const vllm: Placement = {
      ...placement,
      engine: 'vLLM',
      mode: 'epd',
      bootstrapPort: undefined,
      dpSize: 2,
      ecControlAddresses: ['tcp://10.0.0.1:14579', 'tcp://10.0.0.1:14580'],
    };
    const r = endpointRecord(vllm, view(0, 1), 5);
    expect(EndpointRecordSchema.parse(r)).toEqual(r);
    expect(r).toMatchObject({ dpSize: 2, ecControlAddresses: ['tcp://10.0.0.1:14579', 'tcp://10.0.0.1:14580'] });
    const { dpSize: _d, ecControlAddresses: _a, ...plain } = vllm;
    expect(Object.keys(endpointRecord(plain, view(0, 1), 5))).not.toEqual(expect.arrayContaining(['dpSize']));
    expect(endpointRecord(plain, view(0, 1), 5).ecControlAddresses).toBeUndefined();
  });

  it('are rewritten for new values at once, for an unchanged scrape only once per heartbeat', () => {
    const base = endpointRecord(placement, view(2, 10_000), 1);
    expect(sameEndpointRecord(base, endpointRecord(placement, view(2, 11_000), 2), 5000)).toBe(true);
    expect(sameEndpointRecord(base, endpointRecord(placement, view(2, 15_000), 2), 5000)).toBe(false);
    expect(sameEndpointRecord(base, endpointRecord(placement, view(3, 11_000), 2), 5000)).toBe(false);
    expect(sameEndpointRecord(base, endpointRecord(placement, view(2, 10_000, true), 2), 5000)).toBe(false);
    expect(sameEndpointRecord(base, endpointRecord({ ...placement, role: 'decode' }, view(2, 10_000), 2), 5000)).toBe(false);
    expect(sameEndpointRecord(endpointRecord(placement, undefined, 1), endpointRecord(placement, view(0, 10, false), 2), 5000)).toBe(false);
    expect(sameEndpointRecord(base, endpointRecord(placement, view(2, 10_001), 2), 0)).toBe(false);
    // Content compares as JSON would: member order aside, an undefined member is an absent one; arrays in order.
    const reordered = { ...base, metrics: { ...base.metrics, ttftMs: undefined }, models: [...base.models] };
    expect(sameEndpointRecord(base, reordered, 5000)).toBe(true);
    expect(sameEndpointRecord(base, { ...base, models: ['lora', 'm'] }, 5000)).toBe(false);
    expect(sameEndpointRecord(base, { ...base, kvEvents: { endpoint: 'tcp://x:5557' } }, 5000)).toBe(false);
    expect(sameEndpointRecord({ ...base, dpSize: 2 }, { ...base, dpSize: 4 }, 5000)).toBe(false);
  });

  it('without a record heartbeat, a later scrape time alone is never news (freshness says it), but a first one or a new writer is', () => {
    const never = Number.POSITIVE_INFINITY;
    const base = endpointRecord(placement, view(2, 10_000), 1, 'watcher-a');
    expect(base.scrapedBy).toBe('watcher-a');
    expect(EndpointRecordSchema.parse(base)).toEqual(base);
    expect(sameEndpointRecord(base, endpointRecord(placement, view(2, 10_000_000), 2, 'watcher-a'), never)).toBe(true);
    expect(sameEndpointRecord(base, endpointRecord(placement, view(3, 10_000), 2, 'watcher-a'), never)).toBe(false);
    expect(sameEndpointRecord(base, endpointRecord(placement, view(2, 10_000), 2, 'watcher-b'), never)).toBe(false);
    expect(sameEndpointRecord(endpointRecord(placement, undefined, 1, 'watcher-a'), base, never)).toBe(false);
  });

  it("offer a vLLM Mooncake prefill only once its flow is known: the ModelServer's implementation, else the probe", () => {
    const mc: Placement = { ...placement, engine: 'vLLM', ip: 'fd00::1', mooncake: 'auto' };
    const probed = (flow: 'concurrent' | 'sequential', engineIds?: string[]) => ({
      ...view(0, 1),
      mooncake: { flow, detail: 'seen', ...(engineIds ? { engineIds } : {}) },
    });
    expect(endpointRecord(mc, view(0, 1), 5)).toMatchObject({ ready: false });
    expect(endpointRecord(mc, view(0, 1), 5).mooncake).toBeUndefined();
    const up = endpointRecord(mc, probed('concurrent', ['e0', 'e1']), 5);
    expect(EndpointRecordSchema.parse(up)).toEqual(up);
    expect(up).toMatchObject({
      ready: true,
      bootstrapPort: 8998,
      mooncake: { flow: 'concurrent', engineIds: ['e0', 'e1'], source: 'probe' },
    });
    // An upstream bootstrap server whose workers have not registered yet lists nothing: not routable yet.
    expect(endpointRecord(mc, probed('concurrent', []), 5).ready).toBe(false);
    expect(endpointRecord(mc, probed('sequential'), 5)).toMatchObject({ ready: true, mooncake: { flow: 'sequential', source: 'probe' } });
    expect(endpointRecord({ ...mc, mooncake: 'vllm-ascend' }, view(0, 1), 5)).toMatchObject({
      ready: true,
      mooncake: { flow: 'sequential', source: 'override' },
    });
    expect(endpointRecord({ ...mc, mooncake: 'vllm' }, probed('sequential'), 5).ready).toBe(false);
    expect(endpointRecord({ ...mc, mooncake: 'vllm' }, probed('concurrent', ['e0']), 5).mooncake).toMatchObject({ source: 'override' });
    expect(bootstrapQueryUrl(mc)).toBe('http://[fd00::1]:8998/query');
    expect(bootstrapQueryUrl({ ...mc, mooncake: 'vllm-ascend' })).toBeUndefined();
    expect(bootstrapQueryUrl(placement)).toBeUndefined();
  });
});
