import { SpanKind } from '@opentelemetry/api';
import { SCHEMA_VERSION, ScheduleBatchReplySchema, ScheduleBatchSchema, Subjects, type DecisionOrError } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { startNatsServer, type NatsServerHandle } from '@triad/testing';
import { startOtlpReceiver, type OtlpReceiver } from '@triad/telemetry/receiver';
import { z } from 'zod';
import {
  extractBatchTraceContexts,
  finishDecideSpan,
  finishPhaseSpan,
  injectBatchTraceHeaders,
  setupTelemetry,
  startDecideSpan,
  startPhaseSpan,
  startTraced,
  type Telemetry,
  type Traced,
} from '../src/index';
import { extractTraceContext, injectTraceHeaders } from '../src/propagation';
import { finishScheduleSpan, startRequestSpan, startScheduleSpan } from '../src/gateway-spans';
import { traceIdOf } from '../src/spans';
import { epdDecision } from './fixtures';

const EventSchema = z.object({ n: z.number() });
/** The schema version as a non-widening literal type (object literals would widen the constant to number). */
const V: typeof SCHEMA_VERSION = SCHEMA_VERSION;

/** The scheduler's side: one decide span per request of the batch, each continuing its own request's trace. */
function serveSchedule(bus: Bus): void {
  bus.serve(
    Subjects.schedule,
    ScheduleBatchSchema,
    ScheduleBatchReplySchema,
    (batch, ctx) => {
      const parents = extractBatchTraceContexts(ctx.headers, batch.requests.length);
      const decisions: DecisionOrError[] = batch.requests.map((request, i) => {
        const decide = startDecideSpan(parents[i], { request, batchSize: batch.requests.length });
        const filter = startPhaseSpan(decide, 'filter', { profile: 'decode', candidates: 3 });
        finishPhaseSpan(filter, { remaining: 2 });
        const score = startPhaseSpan(decide, 'score', { profile: 'decode', plugin: 'prefix-cache', candidates: 2 });
        finishPhaseSpan(score, { remaining: 2 });
        const decision: DecisionOrError =
          request.model === 'missing'
            ? { id: request.id, ok: false, code: 'SCHED_NO_CANDIDATES', message: 'no endpoint' }
            : { ...epdDecision, id: request.id };
        finishDecideSpan(decide, decision);
        return decision;
      });
      return { v: V, decisions };
    },
    {
      queue: 'schedulers',
      onInvalid: (error) => ({ v: V, error: { code: 'BUS_MESSAGE_INVALID', message: error } }),
      onError: () => ({ v: V, error: { code: 'INTERNAL', message: 'x' } }),
    },
  );
}

function schedulingRequest(id: string, model = 'qwen') {
  return { id, namespace: 'default', modelServer: 'qwen-vl', model };
}

describe('W3C context across NATS with a real nats-server and Bus', () => {
  let nats: NatsServerHandle;
  let receiver: OtlpReceiver;
  let telemetry: Telemetry;
  let gateway: Bus;
  let scheduler: Bus;
  beforeAll(async () => {
    [nats, receiver] = await Promise.all([startNatsServer({ jetstream: false }), startOtlpReceiver()]);
    telemetry = setupTelemetry({ serviceName: 'triad-gateway', version: 'test', env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } });
    gateway = await connectBus({ servers: nats.url, name: 'gateway' });
    scheduler = await connectBus({ servers: nats.url, name: 'scheduler' });
    serveSchedule(scheduler);
  });
  afterAll(async () => {
    await gateway?.close();
    await scheduler?.close();
    await telemetry?.shutdown();
    await Promise.all([receiver?.close(), nats?.close()]);
  });

  it('publish → subscribe: the CONSUMER span is the child of the PRODUCER span', async () => {
    const consumed = new Promise<Traced>((resolve) => {
      scheduler.subscribe(Subjects.dispatch, EventSchema, (_value, ctx) => {
        const t = startTraced('dispatch process', { kind: SpanKind.CONSUMER, parent: extractTraceContext(ctx.headers) });
        t.span.end();
        resolve(t);
      });
    });
    await scheduler.nc.flush();
    const producer = startTraced('dispatch publish', { kind: SpanKind.PRODUCER, root: true });
    const headers = injectTraceHeaders(producer);
    expect(headers['traceparent']).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    gateway.publish(Subjects.dispatch, EventSchema, { n: 1 }, headers);
    producer.span.end();
    const consumer = await consumed;
    await telemetry.forceFlush();
    const traceId = traceIdOf(producer)!;
    const spans = await receiver.waitForSpans((s) => s.traceId === traceId, { count: 2 });
    const p = spans.find((s) => s.kind === 'PRODUCER')!;
    const c = spans.find((s) => s.kind === 'CONSUMER')!;
    expect(c.parentSpanId).toBe(p.spanId);
    expect(c.spanId).toBe(consumer.span.spanContext().spanId);
  });

  it('request → serve: the scheduler span continues the gateway schedule span, with phase children and the decision', async () => {
    const request = startRequestSpan({ method: 'POST', route: '/v1/chat/completions' });
    const schedule = startScheduleSpan(request, { namespace: 'default', modelServer: 'qwen-vl' });
    const reply = await gateway.request(
      Subjects.schedule,
      ScheduleBatchSchema,
      { v: V, requests: [schedulingRequest('r-1')] },
      ScheduleBatchReplySchema,
      { timeoutMs: 5000, headers: injectBatchTraceHeaders([schedule]) },
    );
    const decision = 'decisions' in reply ? reply.decisions[0] : { error: reply.error };
    finishScheduleSpan(schedule, decision, { batchSize: 1 });
    request.span.end();
    await telemetry.forceFlush();
    const traceId = traceIdOf(request)!;
    const spans = await receiver.waitForSpans((s) => s.traceId === traceId, { count: 5 });
    const client = spans.find((s) => s.name === 'schedule' && s.kind === 'CLIENT')!;
    const server = spans.find((s) => s.name === 'schedule' && s.kind === 'SERVER')!;
    expect(server.parentSpanId).toBe(client.spanId);
    expect(server.attributes).toEqual(
      expect.objectContaining({
        'triad.request.id': 'r-1',
        'messaging.batch.message_count': 1,
        'triad.decision.endpoint': 'default.qwen-vl.decode-0',
        'triad.mode': 'epd',
      }),
    );
    const phases = spans
      .filter((s) => s.parentSpanId === server.spanId)
      .map((s) => s.name)
      .sort();
    expect(phases).toEqual(['filter decode', 'score decode']);
    expect(spans.find((s) => s.name === 'score decode')!.attributes).toEqual(
      expect.objectContaining({
        'triad.scheduler.phase': 'score',
        'triad.scheduler.plugin': 'prefix-cache',
        'triad.scheduler.candidates': 2,
        'triad.scheduler.remaining': 2,
      }),
    );
  });

  it("a coalesced batch: each request's scheduler span joins its own trace, errors mark the right span", async () => {
    const requests = [0, 1, 2].map(() => startRequestSpan({ method: 'POST', route: '/v1/chat/completions' }));
    const schedules = requests.map((r) => startScheduleSpan(r, { namespace: 'default', modelServer: 'qwen-vl' }));
    const batch = { v: V, requests: [schedulingRequest('a'), schedulingRequest('b', 'missing'), schedulingRequest('c')] };
    const reply = await gateway.request(Subjects.schedule, ScheduleBatchSchema, batch, ScheduleBatchReplySchema, {
      timeoutMs: 5000,
      headers: injectBatchTraceHeaders(schedules),
    });
    expect('decisions' in reply).toBe(true);
    schedules.forEach((s, i) => finishScheduleSpan(s, 'decisions' in reply ? reply.decisions[i] : { error: 'x' }, { batchSize: 3 }));
    requests.forEach((r) => r.span.end());
    await telemetry.forceFlush();
    const ids = requests.map((r) => traceIdOf(r)!);
    expect(new Set(ids).size).toBe(3);
    const servers = await receiver.waitForSpans((s) => ids.includes(s.traceId) && s.kind === 'SERVER' && s.name === 'schedule', {
      count: 3,
    });
    for (const [i, traceId] of ids.entries()) {
      const server = servers.find((s) => s.traceId === traceId)!;
      expect(server.parentSpanId).toBe(schedules[i].span.spanContext().spanId);
      expect(server.attributes['messaging.batch.message_count']).toBe(3);
    }
    const failed = servers.find((s) => s.traceId === ids[1])!;
    expect(failed.status.code).toBe('ERROR');
    expect(failed.attributes['error.type']).toBe('SCHED_NO_CANDIDATES');
    expect(servers.filter((s) => s.status.code === 'ERROR')).toHaveLength(1);
    const clientSpans = await receiver.waitForSpans((s) => ids.includes(s.traceId) && s.kind === 'CLIENT', { count: 3 });
    expect(clientSpans.find((s) => s.traceId === ids[1])!.status.code).toBe('ERROR');
  });
});
