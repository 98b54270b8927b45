import { z } from 'zod';
import { ObjectMetaSchema } from './meta';

/** The parts of a Pod that Triad reads (labels, IP, phase, readiness); everything else is ignored. */
export const PodSchema = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('Pod'),
  metadata: ObjectMetaSchema,
  status: z
    .object({
      phase: z.string().optional(),
      podIP: z.string().optional(),
      conditions: z.array(z.object({ type: z.string(), status: z.string() })).optional(),
    })
    .optional(),
});
export type Pod = z.infer<typeof PodSchema>;

/** Kubernetes readiness as Kthena counts it: not being deleted, phase Running and condition Ready=True. */
export function isPodReady(pod: Pod): boolean {
  if (pod.metadata.deletionTimestamp) return false;
  if (pod.status?.phase !== 'Running' || !pod.status.podIP) return false;
  return (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}
