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
 * The code of a packed leg event: its type's initial (`s`tart, `f`inish) and its stage's (`a`ggregated, `e`ncode,
 * `p`refill, `d`ecode).
 */
export const PackedLegCodes = {
  sa: ['start', 'aggregated'],
  se: ['start', 'encode'],
  sp: ['start', 'prefill'],
  sd: ['start', 'decode'],
  fa: ['finish', 'aggregated'],
  fe: ['finish', 'encode'],
  fp: ['finish', 'prefill'],
  fd: ['finish', 'decode'],
} as const satisfies Record<string, readonly [DispatchEvent['type'], Stage]>;
export type PackedLegCode = keyof typeof PackedLegCodes;

const TableIndex = z.number().int().min(0);

/**
 * `packed` of a dispatch batch: the same events as `events` without a key per field, the request ids and endpoint
 * keys they share written once, times relative to `at`. Each leg is `[code, request, endpoint, atDelta, ...]`:
 * `request` and `endpoint` index `requests` and `endpoints`, the event's `at` is `at + atDelta`; a start may add its
 * `inputTokens`, a finish its `ttftMs` and then its `tpotMs`. `ok` and `outputTokens` are not carried (no scheduler
 * reads them). An EPD request's six events take 170–300 bytes this way (the fewer the more requests share a message)
 * instead of about 950.
 */
export const PackedLegsSchema = z.object({
  at: z.number().int(),
  requests: z.array(z.string()),
  endpoints: z.array(z.string()),
  legs: z.array(
    z.tuple(
      [z.enum(Object.keys(PackedLegCodes) as [PackedLegCode, ...PackedLegCode[]]), TableIndex, TableIndex, z.number().int()],
      z.number().min(0),
    ),
  ),
});
export type PackedLegs = z.infer<typeof PackedLegsSchema>;

/**
 * The events of `packed`, in order, or why there are none (an index out of its table, a field too many or of the
 * wrong kind for the leg's type, an `at` beyond a safe integer). Shared by the schema and the hand reader, so both
 * make the same events of the same legs.
 */
export function unpackLegs(packed: PackedLegs): DispatchEvent[] | string {
  const { requests, endpoints, legs } = packed;
  const events: DispatchEvent[] = [];
  for (let i = 0; i < legs.length; i++) {
    const leg = legs[i] as readonly unknown[];
    const [type, stage] = PackedLegCodes[leg[0] as PackedLegCode];
    const requestId = requests[leg[1] as number];
    const endpoint = endpoints[leg[2] as number];
    if (requestId === undefined || endpoint === undefined) return `leg ${i}: an index out of its table`;
    const at = packed.at + (leg[3] as number);
    if (!Number.isSafeInteger(at)) return `leg ${i}: at is not a safe integer`;
    const event: DispatchEvent = { type, requestId, endpoint, stage, at };
    if (type === 'start') {
      if (leg.length > 5) return `leg ${i}: a start carries inputTokens at most`;
      if (leg.length === 5) {
        const tokens = leg[4] as number;
        if (!Number.isSafeInteger(tokens)) return `leg ${i}: inputTokens is not an integer`;
        event.inputTokens = tokens;
      }
    } else {
      if (leg.length > 6) return `leg ${i}: a finish carries ttftMs and tpotMs at most`;
      if (leg.length >= 5) event.ttftMs = leg[4] as number;
      if (leg.length === 6) event.tpotMs = leg[5] as number;
    }
    events.push(event);
  }
  return events;
}

const DispatchBatchFields = z.object({
  v: z.literal(SCHEMA_VERSION),
  /** Gateway instance id. */
  gateway: z.string(),
  /** Per-gateway sequence number, to spot gaps. */
  seq: z.number().int().min(0),
  events: z.array(DispatchEventSchema),
  /**
   * More events, after `events`, in the packed form (`PackedLegsSchema`). Optional, so a scheduler that predates it
   * still takes the batch (it drops the field, and the next snapshot corrects its counts); gateways send their
   * events this way unless `TRIAD_DISPATCH_WIRE=events` (the form such a scheduler reads, for the upgrade).
   */
  packed: PackedLegsSchema.optional(),
  inflight: z.record(z.string(), z.number().int().min(0)).optional(),
  /** How long (ms) until the next snapshot at the latest; schedulers expire the gateway after ~3 of these. */
  snapshotIntervalMs: z.number().int().min(1).optional(),
});

/**
 * Body of a `triad.v1.dispatch` message: one gateway's events since its last message, coalesced per event-loop
 * turn. `inflight`, when present, is that gateway's full in-flight count per endpoint key: schedulers replace
 * their view of the gateway with it, which heals lost events and a gateway that died mid-request (its entry
 * expires when its snapshots stop). Read, a batch has its `packed` legs unpacked into `events` (after those sent
 * as objects), so what counts them sees one list of events whichever form the gateway sent.
 */
export const DispatchBatchSchema = DispatchBatchFields.transform((batch, ctx) => {
  const { packed, ...rest } = batch;
  if (packed === undefined) return rest;
  const unpacked = unpackLegs(packed);
  if (typeof unpacked === 'string') {
    ctx.issues.push({ code: 'custom', message: unpacked, path: ['packed', 'legs'], input: packed.legs });
    return z.NEVER;
  }
  return { ...rest, events: rest.events.length === 0 ? unpacked : [...rest.events, ...unpacked] };
});
/** A dispatch batch as read: every event in `events`. */
export type DispatchBatch = z.output<typeof DispatchBatchSchema>;
/** A dispatch batch as sent: events as objects, packed, or both. */
export type DispatchBatchMessage = z.input<typeof DispatchBatchSchema>;
