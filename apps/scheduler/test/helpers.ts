import {
  Buckets,
  EndpointRecordSchema,
  ModelServerRecordSchema,
  ScheduleBatchReplySchema,
  ScheduleBatchSchema,
  Subjects,
  endpointKey,
  objectKey,
  type ScheduleBatchReply,
  type SchedulingRequestInput,
} from '@triad/bus';
import type { Bus } from '@triad/bus/client';
import { captureLogger, type CapturedLogger } from '@triad/runtime/testing';
import { endpointRecord, modelServerRecord, type EndpointSpec, type ModelServerSpecInput } from '@triad/scheduling/testing';

/** A logger whose lines are kept in memory (tests assert on them and keep the output quiet). */
export function memoryLogger(): CapturedLogger {
  return captureLogger('scheduler-test');
}

/**
 * Writes endpoint records for default/<ms>. Their scrape time is an hour ahead, so the stale-metrics filter never
 * sees them age during a slow test run (which would make decisions depend on timing).
 */
export async function putEndpoints(bus: Bus, specs: readonly EndpointSpec[]): Promise<void> {
  const kv = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  for (const s of specs) {
    const r = endpointRecord({ scrapedAt: Date.now() + 3_600_000, ...s });
    await kv.put(endpointKey(r.namespace, r.modelServer, r.pod), r);
  }
}

export async function putModelServer(bus: Bus, input: ModelServerSpecInput): Promise<void> {
  const kv = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
  const r = modelServerRecord(input);
  await kv.put(objectKey(r.namespace, r.name), r);
}

export async function deleteEndpoint(bus: Bus, pod: string, modelServer = 'ms'): Promise<void> {
  const kv = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  await kv.delete(endpointKey('default', modelServer, pod));
}

/** One schedule round-trip, the way the gateway asks. */
export function schedule(bus: Bus, requests: SchedulingRequestInput[]): Promise<ScheduleBatchReply> {
  return bus.request(Subjects.schedule, ScheduleBatchSchema, { v: 1, requests }, ScheduleBatchReplySchema, { timeoutMs: 5000 });
}

export const req = (id: string, extra: Partial<SchedulingRequestInput> = {}): SchedulingRequestInput => ({
  id,
  namespace: 'default',
  modelServer: 'ms',
  model: 'm',
  ...extra,
});

export const podOf = (key: string): string => key.split('.')[2];
