import { ScheduleBatchReplySchema, ScheduleBatchSchema, Subjects, type ScheduleBatchReply, type SchedulingRequestInput } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { BATCH_TRACE_HEADER } from '@triad/telemetry';
import { startOtlpReceiver, treeShape, type OtlpReceiver, type ReceivedSpan } from '@triad/telemetry/receiver';
import { freePort, startNatsServer, type NatsServerHandle } from '@triad/testing';
import { spawnTriad, waitReady, type TriadChild } from '@triad/testing';
import { putEndpoints, putModelServer, req } from './helpers';

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
const traceId = (n: number) => `${hex(0xab, 2)}${hex(n, 30)}`;
const spanId = (n: number) => `${hex(0xcd, 2)}${hex(n, 14)}`;
const traceparent = (n: number, sampled = true) => `00-${traceId(n)}-${spanId(n)}-${sampled ? '01' : '00'}`;

/** An event as `name plugin[#item] in→out` (the parts it has). */
const eventLine = (e: ReceivedSpan['events'][number]) => {
  const a = e.attributes;
  const item = a['triad.encoder.item_index'] !== undefined ? `#${a['triad.encoder.item_index']}` : '';
  const counts =
    a['triad.scheduler.candidates'] !== undefined ? ` ${a['triad.scheduler.candidates']}→${a['triad.scheduler.remaining']}` : '';
  const profile = a['triad.scheduler.profile'] !== undefined ? ` ${a['triad.scheduler.profile']}` : '';
  return `${e.name}${profile} ${a['triad.scheduler.plugin']}${item}${counts}`;
};
const leaf = (name: string) => ({ name, children: [] });

describe('triad scheduler exports its decide spans over OTLP (child process, real nats-server and receiver)', () => {
  let nats: NatsServerHandle;
  let receiver: OtlpReceiver;
  let client: Bus;
  let scheduler: TriadChild | undefined;

  const ask = (requests: SchedulingRequestInput[], headers: Record<string, string>): Promise<ScheduleBatchReply> =>
    client.request(Subjects.schedule, ScheduleBatchSchema, { v: 1, requests }, ScheduleBatchReplySchema, { timeoutMs: 10_000, headers });
  const epd = (id: string, images = 1) =>
    req(id, {
      modelServer: 'vl',
      mediaItems: Array.from({ length: images }, (_, index) => ({ index, key: `u:${id}-${index}`, modality: 'image' as const })),
    });
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
      TRIAD_TRACE_SCHEDULER_PHASES: 'true',
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
    const spans = await traceOf(traceId(1), 7);
    const server = spans.find((s) => s.kind === 'SERVER')!;
    expect(server.name).toBe('schedule');
    expect(server.parentSpanId).toBe(spanId(1));
    expect(server.serviceName).toBe('triad-scheduler');
    expect(server.attributes).toEqual(
      expect.objectContaining({
        'triad.request.id': 'one',
        'triad.model_server': 'vl',
        'messaging.batch.message_count': 1,
        'triad.mode': 'epd',
        'triad.decision.endpoint': 'default.vl.d1',
        'triad.decision.prefill': 'default.vl.p1',
        'triad.decision.top_n': 1,
        'triad.decision.decided_by': 'traced-replica',
      }),
    );
    expect(server.attributes['triad.decision.encoders']).toEqual([expect.stringMatching(/^default\.vl\.e[12]$/)]);

    // Two phase spans per profile run, the plugins as their events; picks and hooks are events of the decide span.
    expect(treeShape(receiver.tree(traceId(1)), undefined, { sorted: true })).toEqual([
      {
        name: 'schedule',
        children: ['filter decode', 'filter encode', 'filter prefill', 'score decode', 'score encode', 'score prefill'].map(leaf),
      },
    ]);
    expect(server.events.map(eventLine)).toEqual([
      'pick decode max-score 1→1',
      'pick prefill max-score 1→1',
      'pick encode encoder-affinity#0 2→2',
      ...['decode', 'prefill'].flatMap((p) => ['prefix-cache', 'session-affinity', 'encoder-cache'].map((h) => `post-schedule ${p} ${h}`)),
    ]);
    const byName = (name: string) => spans.find((s) => s.name === name)!;
    // d2 has 50 waiting requests: the least-request filter removes it.
    expect(byName('filter decode').attributes).toEqual(
      expect.objectContaining({
        'triad.scheduler.phase': 'filter',
        'triad.scheduler.profile': 'decode',
        'triad.scheduler.candidates': 2,
        'triad.scheduler.remaining': 1,
      }),
    );
    expect(byName('filter decode').events.map(eventLine)).toEqual(['filter stale-metrics 2→2', 'filter least-request 2→1']);
    expect(byName('score decode').attributes).toEqual(
      expect.objectContaining({
        'triad.scheduler.phase': 'score',
        'triad.scheduler.candidates': 1,
        'triad.scheduler.remaining': 1,
      }),
    );
    expect(byName('score decode').events.map(eventLine)).toEqual([
      'score least-request',
      'score gpu-usage',
      'score least-latency',
      'score prefix-cache',
      'score session-affinity',
      'score encoder-cache',
      'score prefill-backlog',
    ]);
    expect(byName('filter prefill').attributes['triad.pd_group']).toBe('g1');
    expect(byName('filter encode').events.map(eventLine)).toEqual(['filter stale-metrics 2→2', 'filter least-request 2→2']);
    expect(spans.filter((s) => s.status.code === 'ERROR')).toEqual([]);
  });

  it("a run that fails marks its filter span with the reason, and the decide span with the decision's code", async () => {
    // Only d2 (50 waiting) is left once d1 is excluded: the least-request filter empties the decode run.
    await ask([{ ...epd('excluded'), exclude: ['default.vl.d1'] }], { traceparent: traceparent(6) });
    const spans = await traceOf(traceId(6), 2);
    const server = spans.find((s) => s.kind === 'SERVER')!;
    expect(server.status.code).toBe('ERROR');
    expect(server.attributes['error.type']).toBe('SCHED_FILTERED_OUT');
    const filter = spans.find((s) => s.name === 'filter decode')!;
    expect(filter.status.code).toBe('ERROR');
    expect(filter.attributes).toEqual(
      expect.objectContaining({
        'error.type': 'SCHED_FILTERED_OUT',
        'triad.scheduler.candidates': 2,
        'triad.scheduler.remaining': 0,
      }),
    );
    expect(filter.events.filter((e) => e.name === 'filter').map(eventLine)).toEqual([
      'filter exclude 2→1',
      'filter stale-metrics 1→1',
      'filter least-request 1→0',
    ]);
    expect(filter.events.find((e) => e.name === 'exception')?.attributes['exception.message']).toContain('filtered out by "least-request"');
    expect(treeShape(receiver.tree(traceId(6)))).toEqual([{ name: 'schedule', children: [leaf('filter decode')] }]);
  });

  it(
    'continues each request of a coalesced batch in its own trace (triad-trace-batch header); a failed decision fails its ' + 'span',
    async () => {
      const headers = {
        traceparent: traceparent(2),
        [BATCH_TRACE_HEADER]: JSON.stringify([{ traceparent: traceparent(2) }, { traceparent: traceparent(3) }, null]),
      };
      const reply = await ask([epd('two', 2), req('three', { modelServer: 'nope' }), epd('untraced')], headers);
      expect('decisions' in reply && reply.decisions.map((d) => d.ok)).toEqual([true, false, true]);
      const two = await traceOf(traceId(2), 7);
      const twoServer = two.find((s) => s.kind === 'SERVER')!;
      expect(twoServer.parentSpanId).toBe(spanId(2));
      expect(twoServer.attributes['messaging.batch.message_count']).toBe(3);
      // Two images: two encode picks.
      expect(
        twoServer.events
          .filter((e) => e.name === 'pick' && e.attributes['triad.scheduler.profile'] === 'encode')
          .map((e) => e.attributes['triad.encoder.item_index']),
      ).toEqual([0, 1]);

      const [three] = await traceOf(traceId(3), 1);
      expect(three.parentSpanId).toBe(spanId(3));
      expect(three.status.code).toBe('ERROR');
      expect(three.attributes['error.type']).toBe('SCHED_UNKNOWN_MODEL_SERVER');
      // The third request had no context: its span starts a trace of its own.
      const [own] = await receiver.waitForSpans((s) => s.kind === 'SERVER' && s.attributes['triad.request.id'] === 'untraced', {
        what: "the untraced request's span",
      });
      expect(own.parentSpanId).toBeUndefined();
    },
  );

  it("follows the caller's sampling decision: a not-sampled parent exports nothing, phases included", async () => {
    await ask([epd('declined')], { traceparent: traceparent(4, false) });
    // Spans leave in the order they end: once a later request's span is in, the declined one would be too.
    await ask([epd('marker')], { traceparent: traceparent(5) });
    await traceOf(traceId(5), 7);
    expect(receiver.byTrace(traceId(4))).toEqual([]);
    expect(receiver.spans().filter((s) => s.attributes['triad.request.id'] === 'declined')).toEqual([]);
  });
});
