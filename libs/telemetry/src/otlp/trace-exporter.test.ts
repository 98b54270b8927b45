import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { createTraceExporter } from './trace-exporter';

interface Received {
  readonly path: string;
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

function recordSpans(): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'triad-gateway', 'service.version': '1.2.3' }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer('@triad/telemetry', '1.2.3');
  const root = tracer.startSpan('POST /v1/chat/completions', {
    kind: SpanKind.SERVER,
    attributes: { 'http.route': '/v1/chat/completions' },
  });
  const child = tracer.startSpan(
    'decode',
    { kind: SpanKind.CLIENT, attributes: { 'triad.leg': 'decode', 'gen_ai.usage.output_tokens': 42 } },
    trace.setSpan(ROOT_CONTEXT, root),
  );
  child.addEvent('first_token');
  child.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream ✗' });
  child.end();
  root.end();
  return memory.getFinishedSpans();
}

describe('createTraceExporter through a real HTTP server', () => {
  const received: Received[] = [];
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({ path: req.url ?? '', contentType: req.headers['content-type'], body: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('posts exactly the bytes ProtobufTraceSerializer writes, as application/x-protobuf, and reports success', async () => {
    const exporter = createTraceExporter({ url, timeoutMillis: 5000 });
    const spans = recordSpans();
    for (let round = 0; round < 2; round++) {
      const result = await new Promise<ExportResult>((resolve) => exporter.export(spans, resolve));
      expect(result.code).toBe(ExportResultCode.SUCCESS);
    }
    await exporter.shutdown();
    const expected = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
    expect(received).toHaveLength(2);
    for (const request of received) {
      expect(request.path).toBe('/v1/traces');
      expect(request.contentType).toBe('application/x-protobuf');
      expect(request.body).toEqual(expected);
    }
  });
});
