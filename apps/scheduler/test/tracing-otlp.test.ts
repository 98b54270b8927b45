import { ScheduleBatchReplySchema, ScheduleBatchSchema, Subjects, type ScheduleBatchReply, type SchedulingRequestInput } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { BATCH_TRACE_HEADER } from '@triad/telemetry';
import { startOtlpReceiver, treeShape, type OtlpReceiver, type ReceivedSpan } from '@triad/telemetry/receiver';
import { freePort, startNatsServer, type NatsServerHandle } from '@triad/testing';
import { spawnTriad, waitReady, type TriadChild } from './child-process';
import { putEndpoints, putModelServer, req } from './helpers';

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
const traceId = (n: number) => `${hex(0xab, 2)}${hex(n, 30)}`;
const spanId = (n: number) => `${hex(0xcd, 2)}${hex(n, 14)}`;
const traceparent = (n: number, sampled = true) => `00-${traceId(n)}-${spanId(n)}-${sampled ? '01' : '00'}`;

/** Span label for shape assertions: the name, plus the plugin for plugin phases. */
const label = (s: ReceivedSpan) => (typeof s.attributes['triad.scheduler.plugin'] === 'string' ? `${s.name} ${s.attributes['triad.scheduler.plugin']}` : s.name);

/** The default config's language profiles: filters stale-metrics, least-request; four scorers. */
const languagePlan = (profile: string) => ({
  name: `plan ${profile}`,
  children: [
    `filter ${profile} least-request`, `filter ${profile} stale-metrics`,
    `score ${profile} gpu-usage`, `score ${profile} least-latency`, `score ${profile} least-request`, `score ${profile} prefix-cache`,
  ].map((name) => ({ name, children: [] })),
});
const leaf = (name: string) => ({ name, children: [] });

describe('triad scheduler exports its decide spans over OTLP (child process, real nats-server and receiver)', () => {
  let nats: NatsServerHandle;
  let receiver: OtlpReceiver;
  let client: Bus;
  let scheduler: TriadChild | undefined;

  const ask = (requests: SchedulingRequestInput[], headers: Record<string, string>): Promise<ScheduleBatchReply> =>
    client.request(Subjects.schedule, ScheduleBatchSchema, { v: 1, requests }, ScheduleBatchReplySchema, { timeoutMs: 10_000, headers });
  const epd = (id: string, images = 1) => req(id, { modelServer: 'vl', mediaItems: Array.from({ length: images }, (_, index) => ({ index, key: `u:${id}-${index}`, modality: 'image' as const })) });
  /** The scheduler's span of a trace, then every span of that trace once `count` have arrived. */
  const traceOf = async (id: string, count: number) => {
    await receiver.waitForSpans((s) => s.traceId === id && s.kind === 'SERVER', { what: `the schedule span of ${id}`, timeoutMs: 20_000 });
    return receiver.waitForSpans((s) => s.traceId === id, { count, what: `${count} spans of ${id}`, timeoutMs: 20_000 });
  };

  beforeAll(async () => {
    [nats, receiver] = await Promise.all([startNatsServer(), startOtlpReceiver()]);
    client = await connectBus({ servers: nats.url, name: 'test-gateway' });
    await putModelServer(client, { name: 'vl', mode: 'epd' });
    await putEndpoints(client, [
      { pod: 'd1', modelServer: 'vl', role: 'decode', group: 'g1' },
      // 50 waiting requests: the least-request filter drops it, so the filter spans show 2 → 1.
      { pod: 'd2', modelServer: 'vl', role: 'decode', group: 'g1', waiting: 50 },
      { pod: 'p1', modelServer: 'vl', role: 'prefill', group: 'g1' },
      { pod: 'e1', modelServer: 'vl', role: 'encode', group: 'g1' },
      { pod: 'e2', modelServer: 'vl', role: 'encode', group: 'g1' },
    ]);
    const opsPort = await freePort();
    scheduler = spawnTriad(['scheduler', '--nats', nats.url, '--metrics-port', String(opsPort), '--instance-id', 'traced-replica'], {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      TRIAD_LOG_LEVEL: 'warn',
    });
    await waitReady(scheduler, opsPort, 'triad scheduler ready');
  }, 90_000);

  afterAll(async () => {
    await scheduler?.stop();
    await client?.close();
    await Promise.all([receiver?.close(), nats?.close()]);
  });

  it('continues the traceparent of the NATS message: a SERVER span with the decision, and a child per phase', async () => {
    const reply = await ask([epd('one')], { traceparent: traceparent(1) });
    expect('decisions' in reply && reply.decisions[0]?.ok).toBe(true);
    const spans = await traceOf(traceId(1), 24);
    const server = spans.find((s) => s.kind === 'SERVER')!;
    expect(server.name).toBe('schedule');
    expect(server.parentSpanId).toBe(spanId(1));
    expect(server.serviceName).toBe('triad-scheduler');
    expect(server.attributes).toEqual(expect.objectContaining({
      'triad.request.id': 'one', 'triad.model_server': 'vl', 'messaging.batch.message_count': 1, 'triad.mode': 'epd',
      'triad.decision.endpoint': 'default.vl.d1', 'triad.decision.prefill': 'default.vl.p1', 'triad.decision.top_n': 1,
      'triad.decision.decided_by': 'traced-replica',
    }));
    expect(server.attributes['triad.decision.encoders']).toEqual([expect.stringMatching(/^default\.vl\.e[12]$/)]);

    expect(treeShape(receiver.tree(traceId(1)), label, { sorted: true })).toEqual([{
      name: 'schedule',
      children: [
        leaf('pick decode max-score'), leaf('pick encode encoder-affinity'), leaf('pick prefill max-score'),
        languagePlan('decode'),
        { name: 'plan encode', children: [leaf('filter encode least-request'), leaf('filter encode stale-metrics'), leaf('score encode least-request')] },
        languagePlan('prefill'),
        leaf('post-schedule decode prefix-cache'), leaf('post-schedule prefill prefix-cache'),
      ],
    }]);
    const byLabel = (l: string) => spans.find((s) => label(s) === l)!;
    expect(byLabel('plan decode').attributes).toEqual(expect.objectContaining({
      'triad.scheduler.phase': 'plan', 'triad.scheduler.profile': 'decode', 'triad.scheduler.candidates': 2, 'triad.scheduler.remaining': 1,
    }));
    expect(byLabel('filter decode least-request').attributes).toEqual(expect.objectContaining({
      'triad.scheduler.phase': 'filter', 'triad.scheduler.candidates': 2, 'triad.scheduler.remaining': 1,
    }));
    expect(byLabel('plan prefill').attributes['triad.pd_group']).toBe('g1');
    // The encoder picker orders both encoders: the choice for item 0 and its alternate.
    expect(byLabel('pick encode encoder-affinity').attributes).toEqual(expect.objectContaining({
      'triad.encoder.item_index': 0, 'triad.pd_group': 'g1', 'triad.scheduler.candidates': 2, 'triad.scheduler.remaining': 2,
    }));
  });

  it('continues each request of a coalesced batch in its own trace (triad-trace-batch header); a failed decision fails its span', async () => {
    const headers = {
      traceparent: traceparent(2),
      [BATCH_TRACE_HEADER]: JSON.stringify([{ traceparent: traceparent(2) }, { traceparent: traceparent(3) }, null]),
    };
    const reply = await ask([epd('two', 2), req('three', { modelServer: 'nope' }), epd('untraced')], headers);
    expect('decisions' in reply && reply.decisions.map((d) => d.ok)).toEqual([true, false, true]);
    const two = await traceOf(traceId(2), 25); // two images: two encode picks
    const twoServer = two.find((s) => s.kind === 'SERVER')!;
    expect(twoServer.parentSpanId).toBe(spanId(2));
    expect(twoServer.attributes['messaging.batch.message_count']).toBe(3);
    expect(two.filter((s) => s.name === 'pick encode').map((s) => s.attributes['triad.encoder.item_index']).sort()).toEqual([0, 1]);

    const [three] = await traceOf(traceId(3), 1);
    expect(three!.parentSpanId).toBe(spanId(3));
    expect(three!.status.code).toBe('ERROR');
    expect(three!.attributes['error.type']).toBe('SCHED_UNKNOWN_MODEL_SERVER');
    // The third request had no context: its span starts a trace of its own.
    const [own] = await receiver.waitForSpans((s) => s.kind === 'SERVER' && s.attributes['triad.request.id'] === 'untraced', { what: 'the untraced request\'s span' });
    expect(own!.parentSpanId).toBeUndefined();
  });

  it('follows the caller\'s sampling decision: a not-sampled parent exports nothing, phases included', async () => {
    await ask([epd('declined')], { traceparent: traceparent(4, false) });
    // Spans leave in the order they end: once a later request's span is in, the declined one would be too.
    await ask([epd('marker')], { traceparent: traceparent(5) });
    await traceOf(traceId(5), 24);
    expect(receiver.byTrace(traceId(4))).toEqual([]);
    expect(receiver.spans().filter((s) => s.attributes['triad.request.id'] === 'declined')).toEqual([]);
  });
});
