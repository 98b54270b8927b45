import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { ScheduleBatchReplySchema, ScheduleBatchSchema, Subjects } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import type { SchedulingPhase } from '@triad/scheduling';
import { setupTelemetry, startTraced, type Telemetry } from '@triad/telemetry';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startScheduler, type SchedulerService } from '../src/runner';
import { epochAnchor, finishDecideWithPhases } from '../src/service/decide-tracing';
import { memoryLogger, putEndpoints, putModelServer, req } from './helpers';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';

describe('scheduler tracing', () => {
  let nats: NatsServerHandle;
  let client: Bus;
  let service: SchedulerService;
  let telemetry: Telemetry;
  const exporter = new InMemorySpanExporter();

  beforeAll(async () => {
    telemetry = setupTelemetry({
      serviceName: 'triad-scheduler',
      version: 't',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' },
      exporter,
    });
    nats = await startNatsServer();
    client = await connectBus({ servers: nats.url, name: 'test-gateway' });
    await putModelServer(client, { name: 'ms' });
    await putEndpoints(client, [{ pod: 'p0' }]);
    service = await startScheduler({
      natsUrl: nats.url,
      metricsPort: 0,
      instanceId: 'traced',
      shutdownGraceMs: 1000,
      logger: memoryLogger().logger,
      tracePhases: true,
    });
  });

  afterAll(async () => {
    await service?.close();
    await client?.close();
    await nats?.close();
    await telemetry?.shutdown();
  });

  it('continues the gateway trace with a schedule span per request, carrying the decision', async () => {
    await client.request(Subjects.schedule, ScheduleBatchSchema, { v: 1, requests: [req('traced-1')] }, ScheduleBatchReplySchema, {
      timeoutMs: 5000,
      headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
    });
    const span = await waitFor(
      async () => {
        await telemetry.forceFlush();
        return exporter.getFinishedSpans().find((s) => s.name === 'schedule');
      },
      { what: 'the schedule span' },
    );
    expect(span.spanContext().traceId).toBe(TRACE);
    expect(span.parentSpanContext?.spanId).toBe(PARENT);
    expect(JSON.stringify(span.attributes)).toContain('default.ms.p0');
    const phases = exporter
      .getFinishedSpans()
      .filter((s) => s.parentSpanContext?.spanId === span.spanContext().spanId)
      .map((s) => s.name)
      .sort();
    expect(phases).toEqual(['filter aggregated', 'score aggregated']);
  });

  it('a run that found no candidates at all is a failed filter span; plugin phases without a run still show', async () => {
    const base = { plugin: undefined, item: undefined, failure: undefined } as const;
    const t = performance.now();
    const phases: SchedulingPhase[] = [
      {
        ...base,
        kind: 'plan',
        profile: 'prefill',
        group: 'g3',
        candidatesIn: 0,
        candidatesOut: 0,
        start: t + 0.01,
        end: t + 0.02,
        failure: { code: 'SCHED_NO_CANDIDATES', message: "no ready prefill endpoint in PD group 'g3'" },
      },
      {
        ...base,
        kind: 'scorer',
        profile: 'decode',
        group: undefined,
        plugin: 'gpu-usage',
        candidatesIn: 3,
        candidatesOut: 3,
        start: t + 0.03,
        end: t + 0.04,
      },
    ];
    exporter.reset();
    const decide = startTraced('schedule', { root: true });
    finishDecideWithPhases(
      decide,
      { id: 'r', ok: false, code: 'SCHED_NO_PREFILL_PAIR', message: 'no valid prefill-decode pair' },
      phases,
      epochAnchor(),
    );
    await telemetry.forceFlush();
    const spans = exporter.getFinishedSpans();
    const filter = spans.find((s) => s.name === 'filter prefill')!;
    expect(filter.status.code).toBe(2);
    expect(filter.attributes).toEqual(
      expect.objectContaining({
        'error.type': 'SCHED_NO_CANDIDATES',
        'triad.pd_group': 'g3',
        'triad.scheduler.candidates': 0,
        'triad.scheduler.remaining': 0,
      }),
    );
    const scoreDecode = spans.find((s) => s.name === 'score decode');
    expect(scoreDecode?.events.map((e) => e.attributes?.['triad.scheduler.plugin'])).toEqual(['gpu-usage']);
    expect(spans.every((s) => s.name === 'schedule' || s.parentSpanContext?.spanId === decide.span.spanContext().spanId)).toBe(true);
  });

  it('by default (no TRIAD_TRACE_SCHEDULER_PHASES) a traced decision is its schedule span alone', async () => {
    await service.close();
    service = await startScheduler({
      natsUrl: nats.url,
      metricsPort: 0,
      instanceId: 'no-phases',
      shutdownGraceMs: 1000,
      logger: memoryLogger().logger,
    });
    exporter.reset();
    const trace = '1bf7651916cd43dd8448eb211c80319d';
    await client.request(Subjects.schedule, ScheduleBatchSchema, { v: 1, requests: [req('untraced-phases')] }, ScheduleBatchReplySchema, {
      timeoutMs: 5000,
      headers: { traceparent: `00-${trace}-${PARENT}-01` },
    });
    const span = await waitFor(
      async () => {
        await telemetry.forceFlush();
        return exporter.getFinishedSpans().find((s) => s.name === 'schedule' && s.spanContext().traceId === trace);
      },
      { what: 'the schedule span' },
    );
    expect(JSON.stringify(span.attributes)).toContain('default.ms.p0');
    expect(
      exporter
        .getFinishedSpans()
        .filter((s) => s.spanContext().traceId === trace)
        .map((s) => s.name),
    ).toEqual(['schedule']);
  });
});
