import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { ErrorCode } from '@triad/errors';
import { RateLimitedError, UpstreamError, isRouted, type IncomingHeaders, type RequestContext } from '@triad/request';
import { requestContext, serverProfile } from '@triad/request/testing';
import { epdDecision, useMemoryTelemetry } from '../test/fixtures';
import { createGatewayTracingHooks, requestSpanOf, requestTraceId, scheduleSpanOf } from './gateway-hooks';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function hookRequest(headers: IncomingHeaders = { traceparent: TRACEPARENT }): RequestContext {
  return requestContext({ id: 'req-9', body: { model: 'qwen-vl', stream: true, messages: [] }, headers });
}

const prefillFailed = () =>
  new UpstreamError(
    ErrorCode.UpstreamError,
    'prefill 503',
    { stage: 'prefill', endpoint: 'default.qwen-vl-epd.p0', item: -1, status: 503 },
    true,
  );

describe('gateway lifecycle hooks → spans', () => {
  const { finished } = useMemoryTelemetry();
  const hooks = createGatewayTracingHooks();

  it('turns the hook sequence of an EPD request into the request tree, each leg with its own traceparent', async () => {
    const req: RequestContext = hookRequest();
    hooks.onRequest(req);
    expect(requestTraceId(req)).toBe('0af7651916cd43dd8448eb211c80319c');
    const server = serverProfile({ namespace: 'default', name: 'qwen-vl-epd', engine: 'vLLM', mode: 'epd', connector: 'vllm-epd' });
    req.routed({
      route: 'default/qwen-vl',
      namespace: 'default',
      serverName: 'qwen-vl-epd',
      lora: false,
      server,
      upstreamModel: 'Qwen/Qwen2.5-VL-3B-Instruct',
    });
    if (!isRouted(req)) throw new Error('not routed');
    hooks.onRouted(req);
    expect(scheduleSpanOf(req)?.span.isRecording()).toBe(true);
    req.scheduled({ decision: epdDecision, local: false, durationMs: 1 });
    req.prepared({
      decision: epdDecision,
      attempts: epdDecision.attempts,
      connector: 'vllm-epd',
      injectUsage: true,
      clientWantsUsage: false,
      media: [],
      dpRank: undefined,
    });
    hooks.onScheduled(req);
    expect(scheduleSpanOf(req)).toBeUndefined();
    // Encoders in reverse order: the item is recovered from the decision by endpoint, not by arrival order.
    const e1 = hooks.onStageStart(req, 'encode', epdDecision.encoders[1].endpoint, 0)!;
    const e0 = hooks.onStageStart(req, 'encode', epdDecision.encoders[0].endpoint, 0)!;
    expect(e0.headers!['traceparent']).not.toBe(e1.headers!['traceparent']);
    e0.end(true, 200);
    e1.end(true, 200);
    const prefill = hooks.onStageStart(req, 'prefill', epdDecision.attempts[0].prefill!, 0)!;
    prefill.end(false, 503, prefillFailed());
    hooks.onRetry(req, 1, prefillFailed());
    hooks.onStageStart(req, 'prefill', epdDecision.attempts[0].prefill!, 1)!.end(true, 200);
    const decode = hooks.onStageStart(req, 'decode', epdDecision.attempts[0].endpoint, 1)!;
    hooks.onFirstToken(req);
    decode.end(true, 200);
    req.result.status = 200;
    req.result.usage = { promptTokens: 812, completionTokens: 42 };
    hooks.onEnd(req);

    const spans = await finished();
    const request = spans.find((s) => s.kind === SpanKind.SERVER)!;
    expect(request.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(spans.filter((s) => s !== request).every((s) => s.parentSpanContext?.spanId === request.spanContext().spanId)).toBe(true);
    expect(spans.map((s) => s.name).sort()).toEqual([
      'POST /v1/chat/completions',
      'decode',
      'encode',
      'encode',
      'prefill',
      'prefill',
      'route',
      'schedule',
    ]);
    const encodes = spans.filter((s) => s.name === 'encode');
    expect(
      encodes
        .map((s) => [s.attributes['server.address'], s.attributes['triad.encoder.item_index'], s.attributes['triad.cache_affinity_hit']])
        .sort(),
    ).toEqual([
      ['127.0.1.1', 0, true],
      ['127.0.1.4', 1, false],
    ]);
    expect(encodes[0].attributes['gen_ai.provider.name']).toBe('vllm');
    // The route rewrote the model: the legs name what the engines got, the request span what the client asked for.
    const legs = spans.filter((s) => s.kind === SpanKind.CLIENT && s.name !== 'schedule');
    expect(legs).toHaveLength(5);
    expect(legs.every((s) => s.attributes['gen_ai.request.model'] === 'Qwen/Qwen2.5-VL-3B-Instruct')).toBe(true);
    expect(request.attributes['gen_ai.request.model']).toBe('qwen-vl');
    const prefills = spans.filter((s) => s.name === 'prefill');
    expect(prefills.map((s) => [s.attributes['triad.attempt'], s.status.code, s.attributes['gen_ai.request.max_tokens']])).toEqual([
      [0, SpanStatusCode.ERROR, 1],
      [1, SpanStatusCode.UNSET, 1],
    ]);
    expect(spans.find((s) => s.name === 'decode')!.events.map((e) => e.name)).toEqual(['first_token']);
    expect(spans.find((s) => s.name === 'route')!.attributes).toEqual(
      expect.objectContaining({
        'triad.model_server': 'qwen-vl-epd',
        'triad.model_route': 'qwen-vl',
      }),
    );
    expect(request.attributes).toEqual(
      expect.objectContaining({
        'triad.mode': 'epd',
        'gen_ai.usage.input_tokens': 812,
        'gen_ai.usage.output_tokens': 42,
        'gen_ai.operation.name': 'chat',
        'http.response.status_code': 200,
      }),
    );
    expect(request.events.map((e) => [e.name, e.attributes?.['triad.stage']])).toEqual([['retry', 'prefill']]);
  });

  it.each([
    ['/v1/chat/completions', 'chat'],
    ['/v1/completions', 'text_completion'],
    ['/v1/embeddings', 'embeddings'],
    ['/v1/responses', '/v1/responses'],
  ])('names the operation of %s %j on the request span', async (path, operation) => {
    const req = requestContext({ id: 'req-op', path, body: { model: 'm' }, headers: {} });
    hooks.onRequest(req);
    req.result.status = 400;
    hooks.onEnd(req);
    const request = (await finished()).find((s) => s.kind === SpanKind.SERVER)!;
    expect(request.attributes['gen_ai.operation.name']).toBe(operation);
  });

  it("closes the spans of a request rejected before routing, with admission's events on the request span", async () => {
    const req = hookRequest({});
    expect(requestSpanOf(req)).toBeUndefined();
    hooks.onRequest(req);
    // What createAdmissionHooks({ spanOf: requestSpanOf }) does when it refuses.
    requestSpanOf(req)!.addEvent('triad.admission.rejected', { 'triad.admission.reason': 'input_rate_limited' });
    req.result.status = 429;
    req.result.error = new RateLimitedError('slow down', 'input_rate_limited', 1);
    hooks.onEnd(req);
    const spans = await finished();
    expect(spans.map((s) => s.name).sort()).toEqual(['POST /v1/chat/completions', 'route']);
    expect(spans.find((s) => s.kind === SpanKind.SERVER)!.events.map((e) => e.name)).toEqual(['triad.admission.rejected']);
    expect(spans.find((s) => s.name === 'route')!.attributes['error.type']).toBe('GATEWAY_RATE_LIMITED');
    expect(spans.find((s) => s.kind === SpanKind.SERVER)!.status.code).toBe(SpanStatusCode.UNSET);
  });
});
