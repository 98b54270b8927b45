import { z } from 'zod';
import { SCHEMA_VERSION } from './records';

export const StageSchema = z.enum(['aggregated', 'encode', 'prefill', 'decode']);
export type Stage = z.infer<typeof StageSchema>;

/** A leg sent to (start) or finished on (finish) an endpoint. */
export const DispatchEventSchema = z.object({
  type: z.enum(['start', 'finish']),
  requestId: z.string(),
  /** Endpoint key (`ns.modelserver.pod`). */
  endpoint: z.string(),
  stage: StageSchema,
  at: z.number().int(),
  ok: z.boolean().optional(),
  inputTokens: z.number().int().min(0).optional(),
  outputTokens: z.number().int().min(0).optional(),
  /**
   * Finish events: what the gateway measured on this leg. `ttftMs`: leg start to the first streamed byte of an
   * answering leg, or the whole leg of a prefill; `tpotMs`: time per output token of a streamed answer.
   */
  ttftMs: z.number().min(0).optional(),
  tpotMs: z.number().min(0).optional(),
});
export type DispatchEvent = z.infer<typeof DispatchEventSchema>;

/**
 * Body of a `triad.v1.dispatch` message: one gateway's events since its last message, coalesced per event-loop
 * turn. `inflight`, when present, is that gateway's full in-flight count per endpoint key: schedulers replace
 * their view of the gateway with it, which heals lost events and a gateway that died mid-request (its entry
 * expires when its snapshots stop).
 */
export const DispatchBatchSchema = z.object({
  v: z.literal(SCHEMA_VERSION),
  /** Gateway instance id. */
  gateway: z.string(),
  /** Per-gateway sequence number, to spot gaps. */
  seq: z.number().int().min(0),
  events: z.array(DispatchEventSchema),
  inflight: z.record(z.string(), z.number().int().min(0)).optional(),
  /** How long (ms) until the next snapshot at the latest; schedulers expire the gateway after ~3 of these. */
  snapshotIntervalMs: z.number().int().min(1).optional(),
});
export type DispatchBatch = z.infer<typeof DispatchBatchSchema>;
