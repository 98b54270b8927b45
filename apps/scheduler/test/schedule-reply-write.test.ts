import { scheduleReplyJson } from '@triad/bus';
import { InflightTracker, Scheduler } from '@triad/scheduling';
import { buildIndex, endpointRecord, modelServerRecord } from '@triad/scheduling/testing';
import { SchedulerMetrics } from '../src/metrics';
import { handleScheduleBatch } from '../src/service/schedule-handler';

const endpoints = [
  { pod: 'e1', role: 'encode' as const, group: 'g1', ip: '10.0.0.1' },
  { pod: 'e2', role: 'encode' as const, group: 'g1', ip: '10.0.0.2' },
  {
    pod: 'p1',
    role: 'prefill' as const,
    group: 'g1',
    ip: '10.0.0.3',
    dpSize: 2,
    ecControlAddresses: ['tcp://10.0.0.3:5570', 'tcp://10.0.0.3:5571'],
  },
  { pod: 'd1', role: 'decode' as const, group: 'g1', ip: '10.0.0.4', bootstrapPort: 8998 },
];

function request(i: number, extra: Record<string, unknown> = {}) {
  return {
    id: `r${i}`,
    namespace: 'default',
    modelServer: 'ms',
    model: 'm',
    prefixHashes: ['a1', `b${i}`],
    mediaItems: [{ index: 0, key: `img-${i % 2}`, modality: 'image' }],
    ...extra,
  };
}

describe("the scheduler's reply writer on the scheduler's own replies", () => {
  it('writes every EPD reply as JSON.stringify does, before and after an endpoint moves', () => {
    const index = buildIndex(endpoints, [modelServerRecord({ mode: 'epd' })]);
    const scheduler = new Scheduler({ index, tracker: new InflightTracker(), instanceId: 'scheduler-0' });
    const deps = { scheduler, index, metrics: new SchedulerMetrics() };
    const batch = {
      v: 1 as const,
      requests: [request(1), request(2, { explain: true }), request(3, { exclude: ['default.ms.p1'] }), { id: 'bad' }],
    };
    for (let round = 0; round < 3; round++) {
      const reply = handleScheduleBatch(batch, deps);
      const decisions = 'decisions' in reply ? reply.decisions : [];
      expect(decisions.map((d) => d.ok)).toEqual([true, true, true, false]);
      expect(scheduleReplyJson(reply)).toBe(JSON.stringify(reply));
    }
    // The prefill pod moves: the new address is written, not the one written before.
    index.applyEndpoint({ op: 'PUT', value: endpointRecord({ ...endpoints[2], ip: '10.0.9.9' }) });
    const moved = handleScheduleBatch({ v: 1, requests: [request(4)] }, deps);
    const text = scheduleReplyJson(moved);
    expect(text).toBe(JSON.stringify(moved));
    expect(text).toContain('"ip":"10.0.9.9"');
    expect(text).not.toContain('"ip":"10.0.0.3"');
  });
});
