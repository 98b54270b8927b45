import { z } from 'zod';
import { StageSchema, type Stage } from './dispatch';

/** What made a gateway count a leg as an endpoint failure. */
export const OutlierReasonSchema = z.enum(['5xx', 'connect', 'timeout', 'reset']);
export type OutlierReason = z.infer<typeof OutlierReasonSchema>;

/**
 * Outlier state of one endpoint in one stage, shared by every gateway and scheduler replica through the outliers
 * bucket (key `outlierKey(endpoint, stage)`), written only on transitions and always with compare-and-set.
 * `ejected` with `ejectedUntil` in the future: no new request goes there. `ejected` with `ejectedUntil` past:
 * half-open, real traffic probes it (one success restores it, one failure ejects it again for twice as long).
 * `healthy`: restored; `ejections` is kept so a flapping endpoint's next ejection is still longer.
 */
export const OutlierRecordSchema = z.object({
  schemaVersion: z.literal(1),
  endpoint: z.string().min(1),
  stage: StageSchema,
  state: z.enum(['ejected', 'healthy']),
  /** Wall-clock ms of the latest ejection. */
  ejectedAt: z.number().int().min(0),
  /** Wall-clock ms when the latest ejection ends (0 once healthy). */
  ejectedUntil: z.number().int().min(0),
  /** Ejections in a row (the backoff exponent); reset after a healthy stretch as long as the longest ejection. */
  ejections: z.number().int().min(0),
  reason: OutlierReasonSchema,
  /** Consecutive failures that led to the latest ejection (1 for a failed probe). */
  failures: z.number().int().min(0),
  /** The gateway replica that wrote the latest transition. */
  by: z.string(),
  /** Wall-clock ms of the restore (state `healthy`). */
  healthySince: z.number().int().min(0).optional(),
});
export type OutlierRecord = z.infer<typeof OutlierRecordSchema>;

/** KV key of an endpoint's outlier record in one stage (`ns.server.pod.stage`). */
export function outlierKey(endpoint: string, stage: Stage): string {
  return `${endpoint}.${stage}`;
}
