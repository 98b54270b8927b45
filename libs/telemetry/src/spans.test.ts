import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { SpanStatusCode } from '@opentelemetry/api';
import { TriadError, ErrorCode } from '@triad/errors';
import { useMemoryTelemetry } from '../test/fixtures';
import { setupTelemetry } from './setup';
import {
  finishLegSpan,
  finishRequestSpan,
  finishRouteSpan,
  finishScheduleSpan,
  recordRetry,
  startDecodeSpan,
  startRequestSpan,
  startRouteSpan,
  startScheduleSpan,
} from './gateway-spans';
import { finishEncoderRegistrySpan, finishReconcileSpan, startEncoderRegistrySpan, startReconcileSpan } from './pod-watcher-spans';
import { finishPhaseSpan, startPhaseSpan } from './scheduler-spans';
import { errorTypeOf, inSpan, startTraced, traceIdOf } from './spans';

const endpoint = { key: 'default.m.decode-0', pod: 'decode-0', ip: '10.0.0.7', port: 8000 };
const decodeLeg = { operation: 'chat', engine: 'SGLang', model: 'm', endpoint };

describe('span helpers (in-memory exporter)', () => {
  const { finished } = useMemoryTelemetry();

  it('a 4xx request leaves the server span status unset; a 5xx sets ERROR with error.type', async () => {
    finishRequestSpan(startRequestSpan({ method: 'POST', route: '/v1/completions' }), { statusCode: 404 });
    finishRequestSpan(startRequestSpan({ method: 'POST', route: '/v1/completions' }), { statusCode: 503 });
    finishRequestSpan(startRequestSpan({ method: 'POST', route: '/v1/completions' }), {
      statusCode: 502,
      error: new TriadError(ErrorCode.UpstreamError, 'decode failed'),
      failedStage: 'decode',
    });
    const [s404, s503, s502] = await finished();
    expect(s404.status.code).toBe(SpanStatusCode.UNSET);
    expect(s404.attributes['error.type']).toBeUndefined();
    expect(s503.status.code).toBe(SpanStatusCode.ERROR);
    expect(s503.attributes['error.type']).toBe('503');
    expect(s502.attributes).toEqual(expect.objectContaining({ 'error.type': 'GATEWAY_UPSTREAM_ERROR', 'triad.failed_stage': 'decode' }));
    expect(s502.status.message).toBe('decode failed');
    expect(s502.events.map((e) => e.name)).toEqual(['exception']);
  });

  it('a leg is an error on any 4xx/5xx and on transport errors, with a low-cardinality error.type', async () => {
    const req = startRequestSpan({ method: 'POST', route: '/v1/chat/completions' });
    finishLegSpan(startDecodeSpan(req, { ...decodeLeg, attempt: 0 }), { statusCode: 429 });
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:8000'), { code: 'ECONNREFUSED' });
    finishLegSpan(startDecodeSpan(req, { ...decodeLeg, attempt: 1 }), { error: refused });
    finishLegSpan(startDecodeSpan(req, { ...decodeLeg, attempt: 2 }), { statusCode: 200, outputTokens: 3 });
    recordRetry(req, { attempt: 1, stage: 'decode', reason: 'ECONNREFUSED', endpointKey: endpoint.key });
    req.span.end();
    const spans = await finished();
    const legs = spans.filter((s) => s.name === 'decode');
    expect(legs.map((s) => [s.attributes['triad.attempt'], s.status.code, s.attributes['error.type']])).toEqual([
      [0, SpanStatusCode.ERROR, '429'],
      [1, SpanStatusCode.ERROR, 'ECONNREFUSED'],
      [2, SpanStatusCode.UNSET, undefined],
    ]);
    expect(legs[0].attributes['gen_ai.provider.name']).toBe('sglang');
    const request = spans.find((s) => s.kind === 1)!;
    expect(request.events).toEqual([
      expect.objectContaining({
        name: 'retry',
        attributes: {
          'triad.attempt': 1,
          'triad.stage': 'decode',
          'triad.retry.reason': 'ECONNREFUSED',
          'triad.endpoint.key': endpoint.key,
        },
      }),
    ]);
  });

  it('route and schedule failures mark their own spans', async () => {
    const req = startRequestSpan({ method: 'POST', route: '/v1/chat/completions' });
    finishRouteSpan(startRouteSpan(req, { model: 'nope' }), { error: new TriadError(ErrorCode.GatewayModelNotFound, 'no route') });
    finishScheduleSpan(
      startScheduleSpan(req, { namespace: 'd', modelServer: 'm', local: true }),
      { id: 'x', ok: false, code: 'SCHED_NO_CANDIDATES', message: 'none ready' },
      { local: true },
    );
    req.span.end();
    const spans = await finished();
    expect(spans.find((s) => s.name === 'route')!.attributes['error.type']).toBe('GATEWAY_MODEL_NOT_FOUND');
    const schedule = spans.find((s) => s.name === 'schedule')!;
    expect(schedule.status).toEqual({ code: SpanStatusCode.ERROR, message: 'none ready' });
    expect(schedule.attributes).toEqual(
      expect.objectContaining({
        'error.type': 'SCHED_NO_CANDIDATES',
        'triad.decision.error_code': 'SCHED_NO_CANDIDATES',
        'triad.schedule.local': true,
      }),
    );
    expect(spans.find((s) => s.kind === 1)!.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('continues an incoming traceparent and reports its trace id', async () => {
    const t = startRequestSpan({
      method: 'GET',
      route: '/v1/models',
      headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
    });
    expect(traceIdOf(t)).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(traceIdOf(t.span)).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(traceIdOf(t.context)).toBe('0af7651916cd43dd8448eb211c80319c');
    t.span.end();
    const [span] = await finished();
    expect(span.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
  });

  it('pod-watcher passes start their own traces', async () => {
    const outer = startTraced('outer', { root: true });
    const pass = startReconcileSpan({ source: 'file', trigger: 'watch' });
    finishReconcileSpan(pass, { endpoints: 4, written: 1, deleted: 0 });
    finishEncoderRegistrySpan(startEncoderRegistrySpan({ prefillUrl: 'http://10.0.0.9:30000', modelServer: 'm' }), {
      registered: ['http://10.0.0.5:30001'],
      unregistered: [],
      encoders: 2,
    });
    outer.span.end();
    const spans = await finished();
    const ids = new Set(spans.map((s) => s.spanContext().traceId));
    expect(ids.size).toBe(3);
    expect(spans.find((s) => s.name === 'reconcile')!.attributes).toEqual({
      'triad.reconcile.source': 'file',
      'triad.reconcile.trigger': 'watch',
      'triad.reconcile.endpoints': 4,
      'triad.reconcile.endpoints_written': 1,
      'triad.reconcile.endpoints_deleted': 0,
    });
    expect(spans.find((s) => s.name === 'encoder-registry')!.attributes).toEqual({
      'triad.encoder_registry.prefill': 'http://10.0.0.9:30000',
      'triad.model_server': 'm',
      'triad.encoder_registry.change': 'add',
      'triad.encoder_registry.registered': ['http://10.0.0.5:30001'],
      'triad.encoder_registry.encoders': 2,
    });
  });

  it('inSpan ends the span and records a thrown error', async () => {
    await expect(
      inSpan('work', { root: true }, async () => {
        throw new TriadError(ErrorCode.BusUnavailable, 'nats down');
      }),
    ).rejects.toThrow('nats down');
    await expect(inSpan('ok', { root: true }, () => 7)).resolves.toBe(7);
    const spans = await finished();
    expect(spans.map((s) => [s.name, s.status.code, s.attributes['error.type']])).toEqual([
      ['work', SpanStatusCode.ERROR, 'BUS_UNAVAILABLE'],
      ['ok', SpanStatusCode.UNSET, undefined],
    ]);
  });
});

describe('phase spans reported after the fact', () => {
  it('take the measured start and end (performance.now() values)', async () => {
    const memory = new InMemorySpanExporter();
    const t = setupTelemetry({
      serviceName: 'triad-scheduler',
      version: 't',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' },
      exporter: memory,
    });
    const decide = startTraced('schedule', { root: true });
    const t0 = performance.now();
    const t1 = t0 + 0.25;
    finishPhaseSpan(startPhaseSpan(decide, 'score', { profile: 'decode', startTime: t0 }), { remaining: 2, endTime: t1 });
    decide.span.end();
    await t.forceFlush();
    const phase = memory.getFinishedSpans().find((s) => s.name === 'score decode')!;
    expect(phase.duration[0] * 1e3 + phase.duration[1] / 1e6).toBeCloseTo(0.25, 3);
    await t.shutdown();
  });
});

describe('errorTypeOf', () => {
  it('prefers the TriadError code, then the Node code, then the class name, else _OTHER', () => {
    expect(errorTypeOf(new TriadError(ErrorCode.UpstreamTimeout, 't'))).toBe('GATEWAY_UPSTREAM_TIMEOUT');
    expect(errorTypeOf(Object.assign(new Error('x'), { code: 'ECONNRESET' }))).toBe('ECONNRESET');
    expect(errorTypeOf(new TypeError('x'))).toBe('TypeError');
    expect(errorTypeOf(new Error('x'))).toBe('_OTHER');
    expect(errorTypeOf('boom')).toBe('_OTHER');
  });
});

describe('children of an unsampled span', () => {
  it('reuse the parent locally, but a remote unsampled caller is left to the sampler', async () => {
    const memory = new InMemorySpanExporter();
    const off = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 't',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_TRACES_SAMPLER: 'always_off' },
      exporter: memory,
    });
    const request = startRequestSpan({ method: 'POST', route: '/v1/chat/completions' });
    const decode = startDecodeSpan(request, decodeLeg);
    expect(decode).toBe(request);
    expect(traceIdOf(decode)).toBe(traceIdOf(request));
    await off.shutdown();
    const on = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 't',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_TRACES_SAMPLER: 'always_on' },
      exporter: memory,
    });
    const followed = startRequestSpan({
      method: 'POST',
      route: '/v1/chat/completions',
      headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' },
    });
    expect(followed.span.isRecording()).toBe(true);
    followed.span.end();
    await on.shutdown();
  });
});
