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
      // A pod address is dialled by every gateway: anything but an IP literal (`127.0.0.999`, `::::`, a hostname)
      // refuses the pod version, so the last valid one stays in force. '' is the API server's "not assigned yet".
      podIP: z.union([z.literal(''), z.ipv4(), z.ipv6()], { error: 'must be an IPv4 or IPv6 address' }).optional(),
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
