import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { startOtlpReceiver, type OtlpReceiver } from '@triad/telemetry/receiver';
import { setupTelemetry, startTraced } from '../src/index';
import { extractTraceContext, injectTraceHeaders } from '../src/propagation';
import { finishLegSpan, finishRequestSpan, recordFirstToken, recordRetry, startDecodeSpan, startRequestSpan } from '../src/gateway-spans';
import { NOOP_TRACED, traceIdOf } from '../src/spans';
import { tracingEnabled } from '../src/state';
import { epdDecision, leg } from './fixtures';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';

describe('sampling and on/off switches', () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });

  /** Exports one marker span in its own setup: once it arrives, everything exported before it has arrived too. */
  async function exportMarker(): Promise<void> {
    const telemetry = setupTelemetry({ serviceName: 'triad-gateway', version: 'test', env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } });
    startTraced('marker', { root: true }).span.end();
    await telemetry.shutdown();
    await receiver.waitForSpans((s) => s.name === 'marker');
  }

  it('OTEL_TRACES_SAMPLER=always_off records and exports nothing, but still propagates "not sampled"', async () => {
    receiver.clear();
    const telemetry = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 'test',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_off' },
    });
    expect(telemetry.enabled).toBe(true);
    const request = startRequestSpan({ method: 'POST', route: '/v1/chat/completions' });
    const decode = startDecodeSpan(request, leg(epdDecision.attempts[0].endpoint));
    expect(request.span.isRecording()).toBe(false);
    expect(decode.span.isRecording()).toBe(false);
    expect(injectTraceHeaders(decode)['traceparent']).toMatch(/-00$/);
    finishLegSpan(decode, { statusCode: 200 });
    finishRequestSpan(request, { statusCode: 200 });
    await telemetry.shutdown();
    await exportMarker();
    expect(receiver.spans().map((s) => s.name)).toEqual(['marker']);
  });

  it('parentbased_traceidratio at 0 starts no new traces but follows a sampled caller', async () => {
    receiver.clear();
    const telemetry = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 'test',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' },
    });
    const fresh = startRequestSpan({ method: 'POST', route: '/v1/completions', headers: {} });
    const followed = startRequestSpan({ method: 'POST', route: '/v1/completions', headers: { traceparent: `00-${TRACE}-${PARENT}-01` } });
    const declined = startRequestSpan({
      method: 'POST',
      route: '/v1/completions',
      headers: { traceparent: `00-${'1'.repeat(32)}-${PARENT}-00` },
    });
    expect([fresh, followed, declined].map((t) => t.span.isRecording())).toEqual([false, true, false]);
    [fresh, followed, declined].forEach((t) => finishRequestSpan(t, { statusCode: 200 }));
    await telemetry.forceFlush();
    const [span] = await receiver.waitForSpans((s) => s.traceId === TRACE);
    expect(span.parentSpanId).toBe(PARENT);
    await telemetry.shutdown();
    await exportMarker();
    expect(
      receiver
        .spans()
        .map((s) => s.name)
        .sort(),
    ).toEqual(['POST /v1/completions', 'marker']);
  });

  it('OTEL_SDK_DISABLED=true makes every helper a no-op', async () => {
    const telemetry = setupTelemetry({
      serviceName: 'triad-gateway',
      version: 'test',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: 'true' },
    });
    expect(telemetry.enabled).toBe(false);
    expect(tracingEnabled()).toBe(false);
    const request = startRequestSpan({
      method: 'POST',
      route: '/v1/chat/completions',
      headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
    });
    expect(request).toBe(NOOP_TRACED);
    const decode = startDecodeSpan(request, leg(epdDecision.attempts[0].endpoint));
    expect(decode).toBe(NOOP_TRACED);
    expect(injectTraceHeaders(decode, { accept: 'json' })).toEqual({ accept: 'json' });
    expect(traceIdOf(request)).toBeUndefined();
    expect(traceIdOf()).toBeUndefined();
    recordFirstToken(decode);
    recordRetry(request, { attempt: 1, stage: 'decode', reason: 'ECONNREFUSED' });
    finishLegSpan(decode, { statusCode: 503 });
    finishRequestSpan(request, { statusCode: 503, error: new Error('x') });
    await telemetry.forceFlush();
    await telemetry.shutdown();
  });

  it('stays off without an endpoint, and extraction then returns the base context untouched', async () => {
    const telemetry = setupTelemetry({ serviceName: 'triad-pod-watcher', version: 'test', env: {} });
    expect(telemetry.enabled).toBe(false);
    expect(telemetry.config.disabledReason).toMatch(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    const base = extractTraceContext(undefined);
    expect(extractTraceContext({ traceparent: `00-${TRACE}-${PARENT}-01` }, base)).toBe(base);
    await telemetry.shutdown();
  });

  it('refuses a second setup until the first is shut down', async () => {
    const first = setupTelemetry({ serviceName: 'triad-gateway', version: 'test', env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } });
    expect(() => setupTelemetry({ serviceName: 'triad-gateway', version: 'test', env: {} })).toThrow('already set up');
    await first.shutdown();
    expect(tracingEnabled()).toBe(false);
    const second = setupTelemetry({ serviceName: 'triad-gateway', version: 'test', env: {} });
    await second.shutdown();
  });
});

describe('lazy loading', () => {
  /** Sets telemetry up in a fresh Node process and lists the @opentelemetry packages it loaded. */
  function sdkModulesLoaded(env: Record<string, string>): { loaded: string[]; manager: string } {
    const script = [
      "require('tsx/cjs/api').register();",
      `const t = require(${JSON.stringify(join(__dirname, '../src/index.ts'))});`,
      `const tel = t.setupTelemetry({ serviceName: 'triad-gateway', version: 'x', env: ${JSON.stringify(env)} });`,
      'const loaded = Object.keys(require.cache).filter((k) => /@opentelemetry[\\\\/]/.test(k))',
      "  .map((k) => k.replace(/.*@opentelemetry[\\\\/]/, '').split(/[\\\\/]/)[0]);",
      "const manager = require('@opentelemetry/api').context._getContextManager().constructor.name;",
      'process.stdout.write(JSON.stringify({ loaded: [...new Set(loaded)].sort(), manager }));',
      'tel.shutdown();',
    ].join('\n');
    const run = spawnSync(process.execPath, ['-e', script], { cwd: join(__dirname, '../../..'), encoding: 'utf8', timeout: 60_000 });
    if (run.status !== 0) throw new Error(`child failed: ${run.stderr}`);
    return JSON.parse(run.stdout) as { loaded: string[]; manager: string };
  }

  it(
    'a disabled service loads only the API; an enabled one starts NodeSDK with the OTLP http exporter and registers no ' +
      'async-hooks context manager',
    () => {
      expect(sdkModulesLoaded({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }).loaded).toEqual(['api']);
      const enabled = sdkModulesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
      expect(enabled.loaded).toEqual(
        expect.arrayContaining(['sdk-node', 'sdk-trace-base', 'otlp-exporter-base', 'otlp-transformer', 'resources', 'core']),
      );
      // NodeSDK's default would be the AsyncLocalStorage manager (async hooks for every promise of the proxy).
      expect(enabled.manager).toBe('NoopContextManager');
    },
  );
});
