import { createServer, type Server, type Socket } from 'node:net';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { startOtlpReceiver, treeShape, type OtlpReceiver, type ReceivedSpan, type SpanShape } from '@triad/telemetry/receiver';
import { freePort, startNatsServer, waitFor, type NatsServerHandle, type TriadChild } from '@triad/testing';
import { kvWriter, postJson, startGatewayChild, startSchedulerChild, type GatewayChild, type KvWriter } from './support/child-stack';

// Issue 6, end to end: `triad gateway` and `triad scheduler` as child processes exporting over OTLP/HTTP to a
// receiver in this process, a real nats-server, vLLM EPD engine-sims (2 encoders, 1 prefill, 1 decode).

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
const IMAGE_A = 'https://example.com/trace/a.png';
const IMAGE_B = 'https://example.com/trace/b.png';
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/;

const epdBody = (text = 'Compare the two pictures') => ({
  model: 'vl',
  max_tokens: 8,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text },
        { type: 'image_url', image_url: { url: IMAGE_A } },
        { type: 'image_url', image_url: { url: IMAGE_B } },
      ],
    },
  ],
});

/** Tracing on at 100 %, exporting every 50 ms so tests do not wait for the 5 s default batch delay. */
const tracingEnv = (endpoint: string, sampler = 'always_on'): Record<string, string> => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
  OTEL_TRACES_SAMPLER: sampler,
  OTEL_BSP_SCHEDULE_DELAY: '50',
  // The scheduler's phase spans are opt-in; this test follows a whole trace, phases included.
  TRIAD_TRACE_SCHEDULER_PHASES: 'true',
});

const leaf = (name: string): SpanShape => ({ name, children: [] });
/** `service kind name`, so the shape shows which process made which span. */
const label = (s: ReceivedSpan) => `${s.serviceName.replace(/^triad-/, '')} ${s.kind} ${s.name}`;

/** Inference requests a sim received for one gateway request id (encoders get `<id>:<item>:<hex>`). */
function legRequests(sim: SimEngineHandle, requestId: string) {
  return sim
    .requests()
    .filter(
      (r) =>
        r.method === 'POST' &&
        r.path.startsWith('/v1/') &&
        (r.headers['x-request-id'] === requestId || String(r.headers['x-request-id']).startsWith(`${requestId}:`)),
    );
}

function parseTraceparent(value: unknown): { traceId: string; parent: string; flags: string } {
  const m = TRACEPARENT.exec(String(value));
  if (!m) throw new Error(`not a traceparent: ${String(value)}`);
  return { traceId: m[1], parent: m[2], flags: m[3] };
}

describe('tracing end to end: triad gateway + triad scheduler (child processes) → OTLP receiver', () => {
  let nats: NatsServerHandle;
  let receiver: OtlpReceiver;
  let kv: KvWriter;
  let gateway: GatewayChild | undefined;
  const sims: SimEngineHandle[] = [];
  const children: { stop(): Promise<void> }[] = [];
  let e1: SimEngineHandle;
  let e2: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  /** Registers the EPD ModelServer, its route and the four sims in one nats-server's KV. */
  async function writeInventory(writer: KvWriter): Promise<void> {
    await writer.putServer('vl', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      pipelineMode: 'epd',
      kvConnector: { type: 'nixl' },
      // No re-encode after a consumer 500: the cases below trace one failed leg, not a second try.
      ecConnector: { type: 'shared-storage', enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 0 },
      workloadPort: { port: 8000, protocol: 'http' },
      workloadSelector: {
        matchLabels: { app: 'vl' },
        pdGroup: { groupKey: 'g', encodeLabels: { r: 'e' }, prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } },
      },
    });
    await writer.putRoute('vl', { modelName: 'vl', rules: [{ targetModels: [{ modelServerName: 'vl', weight: 100 }] }] });
    await writer.putEndpoint('vl', 'e1', 'encode', e1, { group: 'g1' });
    await writer.putEndpoint('vl', 'e2', 'encode', e2, { group: 'g1' });
    await writer.putEndpoint('vl', 'p', 'prefill', p, { group: 'g1' });
    await writer.putEndpoint('vl', 'd', 'decode', d, { group: 'g1' });
  }

  /**
   * Sends EPD requests until one is answered 200 with a decision from the scheduler service, not the gateway's
   * local fallback (the scheduler may still be replaying its KV when it reports ready).
   */
  async function warmUp(gw: GatewayChild, tag: string): Promise<void> {
    let n = 0;
    await waitFor(
      async () => {
        const id = `${tag}-warm-${n++}`;
        const res = await postJson(`${gw.url}/v1/chat/completions`, epdBody(), { 'x-request-id': id });
        if (res.status !== 200) return false;
        return (await gw.accessLine(id))['decided_locally'] === false;
      },
      { what: `${tag}: a request placed by the scheduler`, timeoutMs: 30_000, intervalMs: 100 },
    );
  }

  /**
   * The whole EPD trace: 7 gateway spans (request, route, schedule, encode ×2, prefill, decode) + the scheduler's
   * decide span + 2 phase spans for each of its 3 profile runs. The request span ends last in the gateway, so it is
   * waited for first.
   */
  async function epdTrace(traceId: string): Promise<ReceivedSpan[]> {
    await receiver.waitForSpans((s) => s.traceId === traceId && s.kind === 'SERVER' && s.serviceName === 'triad-gateway', {
      what: `the request span of ${traceId}`,
      timeoutMs: 20_000,
    });
    return receiver.waitForSpans((s) => s.traceId === traceId, { count: 14, what: `14 spans of ${traceId}`, timeoutMs: 20_000 });
  }

  /** The gateway's spans of an EPD trace, checked to be one of each stage's (two encodes). */
  function epdGatewaySpans(spans: readonly ReceivedSpan[]): ReceivedSpan[] {
    const gatewaySpans = spans.filter((s) => s.serviceName === 'triad-gateway');
    expect(gatewaySpans.map((s) => s.name).sort()).toEqual([
      'POST /v1/chat/completions',
      'decode',
      'encode',
      'encode',
      'prefill',
      'route',
      'schedule',
    ]);
    return gatewaySpans;
  }

  beforeAll(async () => {
    [nats, receiver] = await Promise.all([startNatsServer(), startOtlpReceiver()]);
    // Each encode takes 25 ms, so the two encode legs of a request overlap by far more than the SDK's
    // millisecond start stamps; the other stages answer at once.
    e1 = await startSimEngine({
      engine: 'vllm',
      role: 'encode',
      host: '127.0.21.1',
      model: MODEL,
      latencyProfile: 'zero',
      latency: { encodeMsPerItem: 25 },
    });
    e2 = await startSimEngine({
      engine: 'vllm',
      role: 'encode',
      host: '127.0.21.2',
      model: MODEL,
      latencyProfile: 'zero',
      latency: { encodeMsPerItem: 25 },
    });
    p = await startSimEngine({ engine: 'vllm', role: 'prefill', host: '127.0.21.3', model: MODEL, latencyProfile: 'zero' });
    d = await startSimEngine({ engine: 'vllm', role: 'decode', host: '127.0.21.4', model: MODEL, latencyProfile: 'zero' });
    sims.push(e1, e2, p, d);
    kv = await kvWriter(nats.url);
    await writeInventory(kv);
    const env = tracingEnv(receiver.url);
    // A generous scheduling budget: on a loaded machine the gateway must still wait for the scheduler's decision
    // instead of deciding locally (which would leave the scheduler's span out of the trace).
    const [s, g] = await Promise.all([
      startSchedulerChild(nats.url, env),
      startGatewayChild(nats.url, env, ['--schedule-budget-ms', '5000']),
    ]);
    gateway = g;
    children.push(s, g);
    await warmUp(g, 'main');
  }, 120_000);

  afterAll(async () => {
    await Promise.all(children.map((c) => c.stop()));
    await kv?.close();
    await Promise.all(sims.map((s) => s.close()));
    await Promise.all([receiver?.close(), nats?.close()]);
  });

  it(
    'one trace across both services: request → route, schedule → scheduler span and its phases, encode ×2 (overlapping), ' +
      'prefill, decode',
    async () => {
      const gw = gateway!;
      for (const s of sims) s.clearRequests();
      const res = await postJson(`${gw.url}/v1/chat/completions`, epdBody(), { 'x-request-id': 'trace-epd' });
      expect(res.status).toBe(200);
      const traceId = res.headers.get('x-triad-trace-id');
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);

      const spans = await epdTrace(traceId!);
      expect(spans).toHaveLength(14);

      expect(treeShape(receiver.tree(traceId!), label, { sorted: true })).toEqual([
        {
          name: 'gateway SERVER POST /v1/chat/completions',
          children: [
            leaf('gateway CLIENT decode'),
            leaf('gateway CLIENT encode'),
            leaf('gateway CLIENT encode'),
            leaf('gateway CLIENT prefill'),
            {
              name: 'gateway CLIENT schedule',
              children: [
                {
                  name: 'scheduler SERVER schedule',
                  children: ['filter decode', 'filter encode', 'filter prefill', 'score decode', 'score encode', 'score prefill'].map((n) =>
                    leaf(`scheduler INTERNAL ${n}`),
                  ),
                },
              ],
            },
            leaf('gateway INTERNAL route'),
          ],
        },
      ]);

      const gatewaySpan = (name: string) => spans.filter((s) => s.serviceName === 'triad-gateway' && s.name === name);
      const request = gatewaySpan('POST /v1/chat/completions')[0];
      expect(request.parentSpanId).toBeUndefined();
      expect(request.status.code).toBe('UNSET');
      expect(request.attributes).toEqual(
        expect.objectContaining({
          'triad.request.id': 'trace-epd',
          'http.response.status_code': 200,
          'triad.mode': 'epd',
          'triad.model_server': 'vl',
        }),
      );

      // The scheduler continued the gateway's `schedule` span from the NATS headers: same trace, that span as parent.
      const schedule = gatewaySpan('schedule')[0];
      const decide = spans.find((s) => s.serviceName === 'triad-scheduler' && s.kind === 'SERVER')!;
      expect(decide.parentSpanId).toBe(schedule.spanId);
      expect(decide.attributes).toEqual(
        expect.objectContaining({
          'triad.request.id': 'trace-epd',
          'triad.mode': 'epd',
          'triad.decision.endpoint': 'default.vl.d',
          'triad.decision.prefill': 'default.vl.p',
        }),
      );
      expect(schedule.attributes['triad.schedule.local']).toBeUndefined();
      expect(new Set(spans.map((s) => s.serviceName))).toEqual(new Set(['triad-gateway', 'triad-scheduler']));

      // Two encode legs, one per image, running at the same time; prefill after them, decode after prefill.
      const itemOf = (s: ReceivedSpan) => Number(s.attributes['triad.encoder.item_index']);
      const encodes = gatewaySpan('encode').sort((a, b) => itemOf(a) - itemOf(b));
      expect(encodes.map((s) => s.attributes['triad.encoder.item_index'])).toEqual([0, 1]);
      const [ea, eb] = encodes as [ReceivedSpan, ReceivedSpan];
      expect(ea.startMs < eb.endMs && eb.startMs < ea.endMs).toBe(true);
      const prefill = gatewaySpan('prefill')[0];
      const decode = gatewaySpan('decode')[0];
      expect(prefill.startMs).toBeGreaterThanOrEqual(Math.max(ea.startMs, eb.startMs));
      expect(decode.startMs).toBeGreaterThanOrEqual(prefill.startMs);
      for (const leg of [ea, eb, prefill, decode]) {
        expect(leg.status.code).toBe('UNSET');
        expect(leg.attributes['http.response.status_code']).toBe(200);
      }

      // Every engine leg carried the traceparent of its own leg span.
      const encodeRequests = [...legRequests(e1, 'trace-epd'), ...legRequests(e2, 'trace-epd')];
      expect(encodeRequests).toHaveLength(2);
      for (const r of encodeRequests) {
        const item = Number(String(r.headers['x-request-id']).split(':')[1]);
        const tp = parseTraceparent(r.headers['traceparent']);
        expect(tp).toEqual({ traceId, parent: encodes[item].spanId, flags: '01' });
        // ... and went to the encoder that span names.
        const sim = e1.requests().includes(r) ? e1 : e2;
        expect(encodes[item].attributes['server.address']).toBe(sim.host);
      }
      const [prefillRequest] = legRequests(p, 'trace-epd');
      const [decodeRequest] = legRequests(d, 'trace-epd');
      expect(parseTraceparent(prefillRequest?.headers['traceparent'])).toEqual({ traceId, parent: prefill.spanId, flags: '01' });
      expect(parseTraceparent(decodeRequest?.headers['traceparent'])).toEqual({ traceId, parent: decode.spanId, flags: '01' });

      // The access log names the same trace.
      const line = await gw.accessLine('trace-epd');
      expect(line).toMatchObject({ status_code: 200, trace_id: traceId, decided_locally: false });
    },
  );

  it('a prefill that fails marks its leg; the request the decode then serves carries triad.stage_fallback', async () => {
    const gw = gateway!;
    p.setFault({ mode: 'error500', count: 1 });
    const res = await postJson(`${gw.url}/v1/chat/completions`, epdBody('this prefill fails'), { 'x-request-id': 'trace-fallback' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-triad-stage-fallback')).toBe('prefill');
    const traceId = res.headers.get('x-triad-trace-id')!;
    const gatewaySpans = epdGatewaySpans(await epdTrace(traceId));
    const prefill = gatewaySpans.find((s) => s.name === 'prefill')!;
    expect(prefill.status.code).toBe('ERROR');
    expect(prefill.attributes).toEqual(expect.objectContaining({ 'http.response.status_code': 500, 'triad.stage': 'prefill' }));
    const request = gatewaySpans.find((s) => s.kind === 'SERVER')!;
    expect(request.status.code).not.toBe('ERROR');
    expect(request.attributes).toEqual(
      expect.objectContaining({ 'http.response.status_code': 200, 'triad.stage_fallback': ['prefill:all_failed'] }),
    );
    expect((await gw.accessLine('trace-fallback'))['stage_fallback']).toEqual([{ stage: 'prefill', reason: 'all_failed' }]);
  });

  it('an engine failure marks the failed leg and the request span with error status, error type and stage', async () => {
    const gw = gateway!;
    // The decode has no shortcut (and the decision no other decode): the request fails.
    d.setFault({ mode: 'error500', count: 1 });
    const res = await postJson(`${gw.url}/v1/chat/completions`, epdBody('this decode fails'), { 'x-request-id': 'trace-fail' });
    expect(res.status).toBe(502);
    const traceId = res.headers.get('x-triad-trace-id')!;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    const spans = await epdTrace(traceId);
    const gatewaySpans = epdGatewaySpans(spans);

    const decode = gatewaySpans.find((s) => s.name === 'decode')!;
    expect(decode.status.code).toBe('ERROR');
    expect(decode.attributes).toEqual(
      expect.objectContaining({
        'error.type': 'GATEWAY_UPSTREAM_ERROR',
        'http.response.status_code': 500,
        'triad.stage': 'decode',
        'triad.endpoint.pod': 'd',
      }),
    );
    expect(decode.events.map((e) => e.name)).toContain('exception');

    const request = gatewaySpans.find((s) => s.kind === 'SERVER')!;
    expect(request.status.code).toBe('ERROR');
    expect(request.status.message).toContain('decode');
    expect(request.attributes).toEqual(
      expect.objectContaining({
        'http.response.status_code': 502,
        'error.type': 'GATEWAY_UPSTREAM_ERROR',
        'triad.failed_stage': 'decode',
      }),
    );

    // Only the failed leg and the request fail: routing, scheduling, both encodes and the prefill succeeded.
    expect(
      spans
        .filter((s) => s.status.code === 'ERROR')
        .map((s) => s.name)
        .sort(),
    ).toEqual(['POST /v1/chat/completions', 'decode']);
    const line = await gw.accessLine('trace-fail');
    expect(line).toMatchObject({ status_code: 502, trace_id: traceId });
  });

  it(
    'sampling off (always_off in gateway and scheduler) exports nothing, and still hands the engines a not-sampled ' + 'traceparent',
    async () => {
      const offNats = await startNatsServer();
      const offReceiver = await startOtlpReceiver();
      const offKv = await kvWriter(offNats.url);
      let offScheduler: TriadChild | undefined;
      let offGateway: GatewayChild | undefined;
      try {
        await writeInventory(offKv);
        const env = tracingEnv(offReceiver.url, 'always_off');
        [offScheduler, offGateway] = await Promise.all([
          startSchedulerChild(offNats.url, env),
          startGatewayChild(offNats.url, env, ['--schedule-budget-ms', '5000']),
        ]);
        await warmUp(offGateway, 'off');
        for (const s of sims) s.clearRequests();
        const res = await postJson(`${offGateway.url}/v1/chat/completions`, epdBody(), { 'x-request-id': 'trace-off' });
        expect(res.status).toBe(200);
        expect(await offGateway.accessLine('trace-off')).toMatchObject({ status_code: 200, decided_locally: false });
        const legs = [e1, e2, p, d].flatMap((s) => legRequests(s, 'trace-off'));
        expect(legs).toHaveLength(4);
        const contexts = legs.map((r) => parseTraceparent(r.headers['traceparent']));
        expect(new Set(contexts.map((c) => c.traceId)).size).toBe(1);
        expect(contexts.map((c) => c.flags)).toEqual(['00', '00', '00', '00']);
        // A SIGTERM drain flushes what the batch processors hold: once both have exited, anything recorded would be in.
        await Promise.all([offGateway.stop(), offScheduler.stop()]);
        expect(offReceiver.spans()).toEqual([]);
        expect(offReceiver.stats).toEqual({ protobuf: 0, json: 0, rejected: 0 });
      } finally {
        await Promise.all([offGateway?.stop(), offScheduler?.stop()]);
        await offKv.close();
        await Promise.all([offReceiver.close(), offNats.close()]);
      }
    },
    120_000,
  );

  it('a dead collector (nothing listening, or a receiver that never answers) neither fails nor holds up requests', async () => {
    // Accepts connections, reads them, never answers.
    const sockets = new Set<Socket>();
    let accepted = 0;
    const blackHole: Server = createServer((socket) => {
      accepted++;
      sockets.add(socket);
      socket.on('data', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
    const blackHolePort = (blackHole.address() as { port: number }).port;
    const closedPort = await freePort();
    const deadGateways: GatewayChild[] = [];
    try {
      // The export timeout (30 s) is far above the bound below: a request that waited for an export would show.
      const dead = (endpoint: string) => ({ ...tracingEnv(endpoint), OTEL_BSP_SCHEDULE_DELAY: '20', OTEL_EXPORTER_OTLP_TIMEOUT: '30000' });
      deadGateways.push(
        ...(await Promise.all([
          startGatewayChild(nats.url, dead(`http://127.0.0.1:${closedPort}`), ['--schedule-budget-ms', '5000']),
          startGatewayChild(nats.url, dead(`http://127.0.0.1:${blackHolePort}`), ['--schedule-budget-ms', '5000']),
        ])),
      );
      for (const gw of deadGateways) {
        expect(gw.lines().find((l) => l['msg'] === 'tracing enabled')).toBeDefined();
      }
      const BOUND_MS = 5_000;
      for (const [i, gw] of deadGateways.entries()) {
        // Waves of 4 concurrent requests, 40 in all: spans are exported (and fail) every 20 ms meanwhile.
        for (let wave = 0; wave < 10; wave++) {
          const results = await Promise.all(
            [0, 1, 2, 3].map((k) => postJson(`${gw.url}/v1/chat/completions`, epdBody(), { 'x-request-id': `dead-${i}-${wave}-${k}` })),
          );
          for (const r of results) {
            expect(r.status).toBe(200);
            expect(r.ms).toBeLessThan(BOUND_MS);
          }
        }
      }
      // The exporter really was at work: it connected to the silent receiver.
      await waitFor(() => accepted > 0, { what: 'an export attempt to the silent receiver' });
    } finally {
      await Promise.all(deadGateways.map((g) => g.stop()));
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => blackHole.close(() => resolve()));
    }
  }, 120_000);
});
