import { ConnectorRegistry, connectorFor, relaysKvParams } from './registry';
import { DEFAULT_STAGE_TIMEOUTS } from '@triad/request';
import { ecProfileOf, kvProfileOf, retryPolicyOf, serverProfileOf, stageTimeoutsOf } from './server-profile';
import type { ModelServerRecord } from '@triad/bus';

describe('connectorFor / relaysKvParams', () => {
  it.each([
    { engine: 'vLLM', mode: 'aggregated', kv: undefined, name: 'aggregated', relay: false },
    { engine: 'vLLM', mode: 'pd', kv: undefined, name: 'vllm-http', relay: false },
    { engine: 'vLLM', mode: 'pd', kv: 'nixl', name: 'vllm-nixl', relay: true },
    { engine: 'vLLM', mode: 'pd', kv: 'mooncake', name: 'vllm-mooncake', relay: true },
    { engine: 'vLLM', mode: 'pd', kv: 'lmcache', name: 'vllm-lmcache', relay: true },
    { engine: 'vLLM', mode: 'pd', kv: 'http', name: 'vllm-http', relay: false },
    { engine: 'vLLM', mode: 'pd', kv: 'nixl', push: 'push', name: 'vllm-nixl-push', relay: true },
    { engine: 'vLLM', mode: 'pd', kv: 'mooncake', push: 'push', name: 'vllm-mooncake', relay: true },
    { engine: 'vLLM', mode: 'epd', kv: undefined, name: 'vllm-epd', relay: true },
    { engine: 'vLLM', mode: 'epd', kv: 'http', name: 'vllm-epd', relay: false },
    { engine: 'SGLang', mode: 'pd', kv: 'http', name: 'sglang-pd', relay: false },
    { engine: 'SGLang', mode: 'epd', kv: undefined, name: 'sglang-epd', relay: false },
  ] as const)('$engine $mode kv=$kv → $name (relay $relay)', (row) => {
    const { engine, mode, kv, name, relay } = row;
    expect(connectorFor(engine, mode, kv, 'push' in row ? row.push : undefined)).toBe(name);
    expect(relaysKvParams(engine, mode, kv)).toBe(relay);
    expect(new ConnectorRegistry().get(name).name).toBe(name);
  });

  it('builds each connector once', () => {
    const registry = new ConnectorRegistry();
    expect(registry.get('vllm-epd')).toBe(registry.get('vllm-epd'));
  });
});

function record(trafficPolicy?: ModelServerRecord['spec']['trafficPolicy']): ModelServerRecord {
  return {
    schemaVersion: 1,
    namespace: 'ns',
    name: 'ms',
    mode: 'pd',
    spec: {
      inferenceEngine: 'vLLM',
      kvConnector: { type: 'nixl' },
      workloadSelector: { matchLabels: { a: 'b' } },
      workloadPort: { port: 8000, protocol: 'http' },
      ...(trafficPolicy ? { trafficPolicy } : {}),
    },
  };
}

describe('server profile', () => {
  it('tries every alternate back to back without a retry policy', () => {
    expect(retryPolicyOf(record())).toEqual({ retries: Number.MAX_SAFE_INTEGER, intervalMs: 0 });
  });
  it('reads attempts as retries after the first try, with the interval', () => {
    expect(retryPolicyOf(record({ retry: { attempts: 2, retryInterval: '250ms' } }))).toEqual({ retries: 2, intervalMs: 250 });
    expect(retryPolicyOf(record({ retry: { attempts: 0, retryInterval: '100ms' } }))).toEqual({ retries: 0, intervalMs: 100 });
  });
  it('applies trafficPolicy.timeout to every stage but keeps the total', () => {
    const d = DEFAULT_STAGE_TIMEOUTS;
    expect(stageTimeoutsOf(record({ timeout: '1.5s' }), d)).toEqual({
      encodeMs: 1500,
      prefillMs: 1500,
      firstByteMs: 1500,
      totalMs: d.totalMs,
    });
    expect(stageTimeoutsOf(record(), d)).toBe(d);
  });
  it('resolves the connector of the record', () => {
    expect(serverProfileOf(record(), DEFAULT_STAGE_TIMEOUTS)).toMatchObject({
      namespace: 'ns',
      name: 'ms',
      engine: 'vLLM',
      mode: 'pd',
      connector: 'vllm-nixl',
      relayKvParams: true,
    });
    expect(serverProfileOf(record(), DEFAULT_STAGE_TIMEOUTS).ec).toBeUndefined();
  });
  it('resolves the vLLM KV settings: type (NIXL for EPD without one), Mooncake implementation, NIXL push', () => {
    expect(kvProfileOf(record())).toEqual({ type: 'nixl', mooncake: 'auto', push: false });
    const spec = record().spec;
    const withKv = (kvConnector: ModelServerRecord['spec']['kvConnector'], mode: 'pd' | 'epd' = 'pd') =>
      kvProfileOf({ ...record(), mode, spec: { ...spec, kvConnector } });
    expect(withKv({ type: 'mooncake', implementation: 'vllm-ascend' })).toEqual({ type: 'mooncake', mooncake: 'vllm-ascend', push: false });
    expect(withKv({ type: 'nixl', transferMode: 'push' })).toEqual({ type: 'nixl', mooncake: 'auto', push: true });
    expect(withKv(undefined)).toEqual({ type: 'http', mooncake: 'auto', push: false });
    expect(withKv(undefined, 'epd')).toEqual({ type: 'nixl', mooncake: 'auto', push: false });
    expect(kvProfileOf({ ...record(), spec: { ...spec, inferenceEngine: 'SGLang' } })).toBeUndefined();
    expect(
      serverProfileOf({ ...record(), spec: { ...spec, kvConnector: { type: 'nixl', transferMode: 'push' } } }, DEFAULT_STAGE_TIMEOUTS),
    ).toMatchObject({
      connector: 'vllm-nixl-push',
      kv: { push: true },
    });
  });

  it('marks the vLLM hand-offs whose transfer parameters name one prompt: NIXL and Mooncake with a prefill stage', () => {
    const base = record();
    const of = (
      mode: ModelServerRecord['mode'],
      kvConnector: ModelServerRecord['spec']['kvConnector'],
      prefillLabels?: Record<string, string>,
    ) =>
      serverProfileOf(
        {
          ...base,
          mode,
          spec: {
            ...base.spec,
            kvConnector,
            workloadSelector: {
              matchLabels: { a: 'b' },
              ...(prefillLabels ? { pdGroup: { groupKey: 'g', prefillLabels, decodeLabels: { r: 'd' }, encodeLabels: { r: 'e' } } } : {}),
            },
          },
        },
        DEFAULT_STAGE_TIMEOUTS,
      ).singlePromptKvHandoff ?? false;
    expect(of('pd', { type: 'nixl' })).toBe(true);
    expect(of('pd', { type: 'nixl', transferMode: 'push' })).toBe(true);
    expect(of('pd', { type: 'mooncake' })).toBe(true);
    expect(of('pd', { type: 'lmcache' })).toBe(false);
    expect(of('pd', { type: 'http' })).toBe(false);
    expect(of('pd', undefined)).toBe(false);
    expect(of('aggregated', { type: 'nixl' })).toBe(false);
    // EPD: NIXL by default, but only with a prefill stage (E→PD writes `prefillLabels: {}`).
    expect(of('epd', undefined, { r: 'p' })).toBe(true);
    expect(of('epd', undefined, {})).toBe(false);
    expect(of('epd', undefined)).toBe(false);
    expect(
      serverProfileOf({ ...base, spec: { ...base.spec, inferenceEngine: 'SGLang' } }, DEFAULT_STAGE_TIMEOUTS).singlePromptKvHandoff,
    ).toBeUndefined();
  });

  it('resolves vLLM EPD EC settings, with defaults when the ModelServer names none', () => {
    const epd = { ...record(), mode: 'epd' as const };
    expect(ecProfileOf(epd)).toEqual({
      connector: 'shared-storage',
      push: false,
      mmEmbeds: false,
      maxEncoderBatch: 16,
      reencodeAttempts: 1,
    });
    const mooncake = {
      ...epd,
      spec: { ...epd.spec, ecConnector: { type: 'mooncake', enableMmEmbeds: true, maxEncoderBatch: 0, reencodeAttempts: 3 } },
    };
    expect(serverProfileOf(mooncake as ModelServerRecord, DEFAULT_STAGE_TIMEOUTS).ec).toEqual({
      connector: 'mooncake',
      push: true,
      mmEmbeds: true,
      maxEncoderBatch: 0,
      reencodeAttempts: 3,
    });
    expect(ecProfileOf({ ...epd, spec: { ...epd.spec, inferenceEngine: 'SGLang' } })).toBeUndefined();
  });
});
