import { parseKeyValueList, readTelemetryConfig } from './config';

describe('readTelemetryConfig', () => {
  it('is off without an endpoint, and says why', () => {
    const c = readTelemetryConfig('triad-gateway', {});
    expect(c.enabled).toBe(false);
    expect(c.disabledReason).toMatch(/OTEL_EXPORTER_OTLP_ENDPOINT/);
  });

  it('turns on with an endpoint and appends /v1/traces to the base endpoint', () => {
    const c = readTelemetryConfig('triad-gateway', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318/' });
    expect(c.enabled).toBe(true);
    expect(c.tracesUrl).toBe('http://jaeger:4318/v1/traces');
  });

  it('uses the traces endpoint as given', () => {
    const c = readTelemetryConfig('triad-gateway', {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:9999/custom',
    });
    expect(c.tracesUrl).toBe('http://b:9999/custom');
  });

  it('OTEL_TRACES_EXPORTER=otlp turns on with the default endpoint; none and OTEL_SDK_DISABLED turn off', () => {
    expect(readTelemetryConfig('x', { OTEL_TRACES_EXPORTER: 'otlp' })).toEqual(
      expect.objectContaining({ enabled: true, tracesUrl: 'http://localhost:4318/v1/traces' }),
    );
    expect(readTelemetryConfig('x', { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a' }).enabled).toBe(false);
    const disabled = readTelemetryConfig('x', { OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a' });
    expect(disabled.enabled).toBe(false);
    expect(disabled.disabledReason).toBe('OTEL_SDK_DISABLED=true');
    expect(readTelemetryConfig('x', { OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a' }).enabled).toBe(true);
  });

  it('reads the samplers, the ratio only for ratio samplers, and warns on bad values', () => {
    expect(readTelemetryConfig('x', {})).toEqual(expect.objectContaining({ sampler: 'parentbased_always_on', samplerRatio: 1 }));
    expect(readTelemetryConfig('x', { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' })).toEqual(
      expect.objectContaining({ sampler: 'parentbased_traceidratio', samplerRatio: 0.1 }),
    );
    expect(readTelemetryConfig('x', { OTEL_TRACES_SAMPLER: 'always_off', OTEL_TRACES_SAMPLER_ARG: '0.1' }).samplerRatio).toBe(1);
    const bad = readTelemetryConfig('x', { OTEL_TRACES_SAMPLER: 'jaeger_remote', OTEL_TRACES_SAMPLER_ARG: '7' });
    expect(bad.sampler).toBe('parentbased_always_on');
    expect(bad.warnings).toEqual([expect.stringContaining('jaeger_remote')]);
    const badRatio = readTelemetryConfig('x', { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' });
    expect(badRatio.samplerRatio).toBe(1);
    expect(badRatio.warnings).toEqual([expect.stringContaining('OTEL_TRACES_SAMPLER_ARG=1.5')]);
  });

  it('service name: OTEL_SERVICE_NAME, then service.name in OTEL_RESOURCE_ATTRIBUTES, then the app name', () => {
    expect(readTelemetryConfig('triad-scheduler', {}).serviceName).toBe('triad-scheduler');
    expect(readTelemetryConfig('triad-scheduler', { OTEL_RESOURCE_ATTRIBUTES: 'service.name=sched-b' }).serviceName).toBe('sched-b');
    expect(
      readTelemetryConfig('triad-scheduler', { OTEL_RESOURCE_ATTRIBUTES: 'service.name=sched-b', OTEL_SERVICE_NAME: 'sched-c' })
        .serviceName,
    ).toBe('sched-c');
  });

  it('adds downward-API pod attributes and lets OTEL_RESOURCE_ATTRIBUTES override them', () => {
    const c = readTelemetryConfig('triad-gateway', {
      POD_NAME: 'gw-7d9',
      POD_NAMESPACE: 'inference',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,k8s.namespace.name=other',
    });
    expect(c.resourceAttributes).toEqual({
      'k8s.pod.name': 'gw-7d9',
      'service.instance.id': 'gw-7d9',
      'k8s.namespace.name': 'other',
      'deployment.environment': 'prod',
    });
    expect(readTelemetryConfig('triad-gateway', {}).resourceAttributes).toEqual({});
  });

  it('bounds the batch queue and keeps the batch size within it', () => {
    const c = readTelemetryConfig('x', {
      OTEL_BSP_MAX_QUEUE_SIZE: '100',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512',
      OTEL_BSP_SCHEDULE_DELAY: 'soon',
    });
    expect(c.batch).toEqual({ maxQueueSize: 100, maxExportBatchSize: 100, scheduledDelayMillis: 5000, exportTimeoutMillis: 30000 });
    expect(c.warnings).toEqual([expect.stringContaining('OTEL_BSP_SCHEDULE_DELAY')]);
  });

  it('reads span limits: OTEL_SPAN_* first, then the general OTEL_ATTRIBUTE_*, else the SDK defaults', () => {
    expect(readTelemetryConfig('x', {}).spanLimits).toEqual({
      attributeCountLimit: 128,
      attributeValueLengthLimit: Infinity,
      eventCountLimit: 128,
      linkCountLimit: 128,
    });
    const c = readTelemetryConfig('x', {
      OTEL_ATTRIBUTE_COUNT_LIMIT: '10',
      OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT: '20',
      OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '256',
      OTEL_SPAN_EVENT_COUNT_LIMIT: '-1',
    });
    expect(c.spanLimits).toEqual({ attributeCountLimit: 20, attributeValueLengthLimit: 256, eventCountLimit: 128, linkCountLimit: 128 });
    expect(c.warnings).toEqual([expect.stringContaining('OTEL_SPAN_EVENT_COUNT_LIMIT=-1')]);
  });
});

describe('span recorder switch', () => {
  it("defaults to Triad's recorder, takes sdk, and warns about anything else", () => {
    expect(readTelemetryConfig('x', {}).spanRecorder).toBe('recorder');
    expect(readTelemetryConfig('x', { TRIAD_TRACE_RECORDER: 'SDK' }).spanRecorder).toBe('sdk');
    const bad = readTelemetryConfig('x', { TRIAD_TRACE_RECORDER: 'fast' });
    expect(bad.spanRecorder).toBe('recorder');
    expect(bad.warnings).toEqual(['TRIAD_TRACE_RECORDER=fast is not sdk or recorder; using recorder']);
  });
});

describe('parseKeyValueList', () => {
  it('decodes percent-encoding, trims, and reports malformed entries', () => {
    const warnings: string[] = [];
    expect(parseKeyValueList(' a = x%20y ,b=c=d,,=nokey,bad', warnings)).toEqual({ a: 'x y', b: 'c=d' });
    expect(warnings).toHaveLength(2);
  });
});
