import { z } from 'zod';
import { SCHEMA_VERSION } from './records';
import { SchedulingLimits } from './scheduling';

/**
 * What one scheduling decision taught about where content now lives: the endpoint chosen for a stage, and the
 * prompt blocks, media items and session it was sent. Every replica (scheduler or gateway fallback) applies the
 * records of the others, so affinity does not depend on which replica decided.
 */
export const AffinityRecordSchema = z.object({
  /** Model the engine sees (the prefix tables are per model). */
  model: z.string(),
  /** Endpoint key (`ns.modelserver.pod`). */
  endpoint: z.string().min(1),
  role: z.enum(['aggregated', 'decode', 'prefill', 'encode']),
  /** Chained prompt block hashes sent to the endpoint (those the prefix-cache plugins keep). */
  prefixHashes: z.array(z.string()).max(SchedulingLimits.maxPrefixHashes).default([]),
  /** Content keys of the media items the endpoint encoded (its encoder cache). */
  mediaKeys: z.array(z.string()).max(SchedulingLimits.maxMediaItems).optional(),
  /** Session key the endpoint now serves. */
  session: z.string().optional(),
});
export type AffinityRecord = z.infer<typeof AffinityRecordSchema>;
export type AffinityRecordInput = z.input<typeof AffinityRecordSchema>;

/** Body of a `triad.v1.affinity` message: the records one replica learned in one event-loop turn. */
export const AffinityBatchSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  /** Instance id of the replica that decided (its own messages are skipped when they come back). */
  origin: z.string().min(1),
  records: z.array(AffinityRecordSchema).min(1).max(4096),
});
export type AffinityBatch = z.infer<typeof AffinityBatchSchema>;
