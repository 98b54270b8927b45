import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { TriadError, ErrorCode } from '@triad/errors';
import { epdDecision, useMemoryTelemetry } from '../test/fixtures';
import { createGatewayTracingHooks, requestSpanOf, requestTraceId, scheduleSpanOf, type TracedHookRequest } from './gateway-hooks';

function hookRequest(extra: Partial<TracedHookRequest> = {}): TracedHookRequest & { route: string | undefined; modelServer: string | undefined; upstreamModel: string } {
  return {
    id: 'req-9', method: 'POST', path: '/v1/chat/completions', model: 'qwen-vl', stream: true, route: undefined, modelServer: undefined, upstreamModel: '',
    headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, locals: {}, ...extra,
  };
}

describe('gateway lifecycle hooks → spans', () => {
  const { finished } = useMemoryTelemetry();
  const hooks = createGatewayTracingHooks({ engineOf: () => 'vLLM' });

  it('turns the hook sequence of an EPD request into the request tree, each leg with its own traceparent', async () => {
    const req = hookRequest();
    hooks.onRequest(req);
    expect(requestTraceId(req)).toBe('0af7651916cd43dd8448eb211c80319c');
    req.route = 'default/qwen-vl';
    req.modelServer = 'default/qwen-vl-epd';
    req.upstreamModel = 'Qwen/Qwen2.5-VL-3B-Instruct';
    hooks.onRouted(req);
    expect(scheduleSpanOf(req)?.span.isRecording()).toBe(true);
    hooks.onScheduled(req, epdDecision, false);
    expect(scheduleSpanOf(req)).toBeUndefined();
    // Encoders in reverse order: the item is recovered from the decision by endpoint, not by arrival order.
    const e1 = hooks.onStageStart(req, 'encode', epdDecision.encoders[1]!.endpoint, 0)!;
    const e0 = hooks.onStageStart(req, 'encode', epdDecision.encoders[0]!.endpoint, 0)!;
    expect(e0.headers!['traceparent']).not.toBe(e1.headers!['traceparent']);
    e0.end(true, 200);
    e1.end(true, 200);
    const prefill = hooks.onStageStart(req, 'prefill', epdDecision.attempts[0]!.prefill!, 0)!;
    prefill.end(false, 503, new TriadError(ErrorCode.UpstreamError, 'prefill 503', { details: { stage: 'prefill' } }));
    hooks.onRetry(req, 1, new TriadError(ErrorCode.UpstreamError, 'prefill 503', { details: { stage: 'prefill' } }));
    hooks.onStageStart(req, 'prefill', epdDecision.attempts[0]!.prefill!, 1)!.end(true, 200);
    const decode = hooks.onStageStart(req, 'decode', epdDecision.attempts[0]!.endpoint, 1)!;
    hooks.onFirstToken(req);
    decode.end(true, 200);
    hooks.onEnd(req, { status: 200, error: undefined, usage: { promptTokens: 812, completionTokens: 42 } });

    const spans = await finished();
    const request = spans.find((s) => s.kind === SpanKind.SERVER)!;
    expect(request.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(spans.filter((s) => s !== request).every((s) => s.parentSpanContext?.spanId === request.spanContext().spanId)).toBe(true);
    expect(spans.map((s) => s.name).sort()).toEqual(['POST /v1/chat/completions', 'decode', 'encode', 'encode', 'prefill', 'prefill', 'route', 'schedule']);
    const encodes = spans.filter((s) => s.name === 'encode');
    expect(encodes.map((s) => [s.attributes['server.address'], s.attributes['triad.encoder.item_index'], s.attributes['triad.cache_affinity_hit']]).sort()).toEqual([
      ['127.0.1.1', 0, true], ['127.0.1.4', 1, false],
    ]);
    expect(encodes[0]!.attributes['gen_ai.provider.name']).toBe('vllm');
    // The route rewrote the model: the legs name what the engines got, the request span what the client asked for.
    const legs = spans.filter((s) => s.kind === SpanKind.CLIENT && s.name !== 'schedule');
    expect(legs).toHaveLength(5);
    expect(legs.every((s) => s.attributes['gen_ai.request.model'] === 'Qwen/Qwen2.5-VL-3B-Instruct')).toBe(true);
    expect(request.attributes['gen_ai.request.model']).toBe('qwen-vl');
    const prefills = spans.filter((s) => s.name === 'prefill');
    expect(prefills.map((s) => [s.attributes['triad.attempt'], s.status.code, s.attributes['gen_ai.request.max_tokens']])).toEqual([
      [0, SpanStatusCode.ERROR, 1], [1, SpanStatusCode.UNSET, 1],
    ]);
    expect(spans.find((s) => s.name === 'decode')!.events.map((e) => e.name)).toEqual(['first_token']);
    expect(spans.find((s) => s.name === 'route')!.attributes).toEqual(expect.objectContaining({ 'triad.model_server': 'qwen-vl-epd', 'triad.model_route': 'qwen-vl' }));
    expect(request.attributes).toEqual(expect.objectContaining({
      'triad.mode': 'epd', 'gen_ai.usage.input_tokens': 812, 'gen_ai.usage.output_tokens': 42, 'gen_ai.operation.name': 'chat', 'http.response.status_code': 200,
    }));
    expect(request.events.map((e) => [e.name, e.attributes?.['triad.stage']])).toEqual([['retry', 'prefill']]);
  });

  it('closes the spans of a request rejected before routing, with admission\'s events on the request span', async () => {
    const req = hookRequest({ headers: {} });
    expect(requestSpanOf(req)).toBeUndefined();
    hooks.onRequest(req);
    // What createAdmissionHooks({ spanOf: requestSpanOf }) does when it refuses.
    requestSpanOf(req)!.addEvent('triad.admission.rejected', { 'triad.admission.reason': 'input_rate_limited' });
    hooks.onEnd(req, { status: 429, error: new TriadError(ErrorCode.GatewayRateLimited, 'slow down'), usage: undefined });
    const spans = await finished();
    expect(spans.map((s) => s.name).sort()).toEqual(['POST /v1/chat/completions', 'route']);
    expect(spans.find((s) => s.kind === SpanKind.SERVER)!.events.map((e) => e.name)).toEqual(['triad.admission.rejected']);
    expect(spans.find((s) => s.name === 'route')!.attributes['error.type']).toBe('GATEWAY_RATE_LIMITED');
    expect(spans.find((s) => s.kind === SpanKind.SERVER)!.status.code).toBe(SpanStatusCode.UNSET);
  });
});
