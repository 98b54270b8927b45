import { createServer, type Server, type Socket } from 'node:net';
import { freePort, waitFor } from '@triad/testing';
import { setupTelemetry } from '../src/index';
import { finishLegSpan, finishRequestSpan, startDecodeSpan, startEncodeSpan, startRequestSpan } from '../src/gateway-spans';
import { type TelemetryLogger } from '../src/diag-logger';
import { epdDecision, leg } from './fixtures';

/** One gateway request's worth of spans (request, two encodes, decode). */
function oneRequest(): void {
  const request = startRequestSpan({ method: 'POST', route: '/v1/chat/completions' });
  const e0 = startEncodeSpan(request, { ...leg(epdDecision.encoders[0].endpoint), item: { index: 0 } });
  const e1 = startEncodeSpan(request, { ...leg(epdDecision.encoders[1].endpoint), item: { index: 1 } });
  finishLegSpan(e0, { statusCode: 200 });
  finishLegSpan(e1, { statusCode: 200 });
  const decode = startDecodeSpan(request, leg(epdDecision.attempts[0].endpoint));
  finishLegSpan(decode, { statusCode: 200, outputTokens: 5 });
  finishRequestSpan(request, { statusCode: 200 });
}

function collectingLogger(): TelemetryLogger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, warn: (_obj, msg) => lines.push(msg ?? ''), info: () => undefined };
}

// Bounds here are deliberately loose (an order of magnitude above what they guard) so the tests never flake;
// what they prove is that nothing waits for the collector: not span.end(), and not shutdown past its bound.
describe('a collector that is down never blocks or fails requests', () => {
  it('nothing listening: ending spans stays synchronous, the failure is logged once, shutdown resolves', async () => {
    const port = await freePort();
    const logger = collectingLogger();
    const telemetry = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 'test',
      logger,
      shutdownTimeoutMs: 2000,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_TIMEOUT: '500',
        OTEL_BSP_SCHEDULE_DELAY: '20',
        OTEL_BSP_MAX_QUEUE_SIZE: '256',
      },
    });
    const started = performance.now();
    for (let i = 0; i < 2000; i++) oneRequest();
    expect(performance.now() - started).toBeLessThan(10_000);
    await waitFor(() => logger.lines.some((l) => /ECONNREFUSED|export|Dropped/i.test(l)), { what: 'an export failure warning' });
    for (let i = 0; i < 2000; i++) oneRequest();
    const stopping = performance.now();
    await telemetry.shutdown();
    expect(performance.now() - stopping).toBeLessThan(2000 + 3000);
    // Throttled: a few distinct messages, not one line per failed export or dropped batch.
    expect(logger.lines.length).toBeLessThan(10);
  });

  describe('a collector that accepts the connection and never answers', () => {
    let hung: Server;
    const sockets = new Set<Socket>();
    let closedSockets = 0;
    beforeAll(async () => {
      hung = createServer((socket) => {
        sockets.add(socket);
        // Read and discard (a paused socket would never see the client's FIN), and never answer.
        socket.resume();
        socket.on('close', () => closedSockets++);
        socket.on('error', () => undefined);
      });
      await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    });
    afterAll(async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => hung.close(() => resolve()));
    });

    it('shutdown returns at its own bound while the export request is still hanging', async () => {
      const port = (hung.address() as { port: number }).port;
      const telemetry = setupTelemetry({
        serviceName: 'triad-gateway',
        version: 'test',
        shutdownTimeoutMs: 200,
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_EXPORTER_OTLP_TIMEOUT: '1500' },
      });
      oneRequest();
      await telemetry.shutdown();
      // The exporter's request is still open (it gives up only after its own 1.5 s timeout): shutdown did not wait.
      expect(sockets.size).toBeGreaterThan(0);
      expect(closedSockets).toBe(0);
      // Let the exporter time out by itself so no retry timer outlives the test.
      await waitFor(() => closedSockets === sockets.size, { what: 'the exporter to give up', timeoutMs: 15_000 });
    }, 20_000);
  });
});
