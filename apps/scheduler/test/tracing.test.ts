import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { ScheduleBatchReplySchema, ScheduleBatchSchema, Subjects } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { setupTelemetry, type Telemetry } from '@triad/telemetry';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startScheduler, type SchedulerService } from '../src/runner';
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
    telemetry = setupTelemetry({ serviceName: 'triad-scheduler', version: 't', env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }, exporter });
    nats = await startNatsServer();
    client = await connectBus({ servers: nats.url, name: 'test-gateway' });
    await putModelServer(client, { name: 'ms' });
    await putEndpoints(client, [{ pod: 'p0' }]);
    service = await startScheduler({ natsUrl: nats.url, metricsPort: 0, instanceId: 'traced', shutdownGraceMs: 1000, logger: memoryLogger().logger });
  });

  afterAll(async () => {
    await service?.close();
    await client?.close();
    await nats?.close();
    await telemetry?.shutdown();
  });

  it('continues the gateway trace with a schedule span per request, carrying the decision', async () => {
    await client.request(Subjects.schedule, ScheduleBatchSchema, { v: 1, requests: [req('traced-1')] }, ScheduleBatchReplySchema, {
      timeoutMs: 5000, headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
    });
    const span = await waitFor(async () => {
      await telemetry.forceFlush();
      return exporter.getFinishedSpans().find((s) => s.name === 'schedule');
    }, { what: 'the schedule span' });
    expect(span.spanContext().traceId).toBe(TRACE);
    expect(span.parentSpanContext?.spanId).toBe(PARENT);
    expect(JSON.stringify(span.attributes)).toContain('default.ms.p0');
  });
});
