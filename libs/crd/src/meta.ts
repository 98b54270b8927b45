import { z } from 'zod';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** A Kubernetes object name (DNS-1123 subdomain, at most 253 characters). */
export const ObjectNameSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(253, 'must be at most 253 characters')
  .regex(DNS_SUBDOMAIN, 'must be a lowercase DNS-1123 subdomain (a-z, 0-9, "-" and ".")');

/** A Kubernetes namespace name (DNS-1123 label). */
export const NamespaceSchema = z.string().max(63, 'must be at most 63 characters').regex(DNS_LABEL, 'must be a lowercase DNS-1123 label');

/** True when `key` is a valid label key: optional `prefix/` (a DNS subdomain) and a name of at most 63 chars. */
export function isValidLabelKey(key: string): boolean {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return false;
  return name.length > 0 && name.length <= 63 && LABEL_NAME.test(name);
}

/** True when `value` is a valid label value (empty, or at most 63 alphanumerics with `-_.` inside). */
export function isValidLabelValue(value: string): boolean {
  return value === '' || (value.length <= 63 && LABEL_NAME.test(value));
}

/** A label key → value map with Kubernetes syntax rules. */
export const LabelMapSchema = z.record(z.string(), z.string()).superRefine((labels, ctx) => {
  for (const [key, value] of Object.entries(labels)) {
    if (!isValidLabelKey(key)) ctx.addIssue({ code: 'custom', path: [key], message: `invalid label key '${key}'` });
    else if (!isValidLabelValue(value)) ctx.addIssue({ code: 'custom', path: [key], message: `invalid label value '${value}'` });
  }
});

/** The subset of ObjectMeta that Triad reads. Unknown metadata fields are kept out of the parsed value. */
export const ObjectMetaSchema = z.object({
  name: ObjectNameSchema,
  namespace: NamespaceSchema.default('default'),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  generation: z.number().int().optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().nullish(),
});
export type ObjectMeta = z.infer<typeof ObjectMetaSchema>;

/** A status condition, as `metav1.Condition`. */
export const ConditionSchema = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string().optional(),
  observedGeneration: z.number().int().optional(),
});
export type Condition = z.infer<typeof ConditionSchema>;

/** A condition as Triad's status writers set it: True or False, observed at `generation` (when known), stamped `now`. */
export function makeCondition(
  type: string,
  ok: boolean,
  reason: string,
  message: string,
  generation: number | undefined,
  now: Date,
): Condition {
  return {
    type,
    status: ok ? 'True' : 'False',
    reason,
    message,
    lastTransitionTime: now.toISOString(),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

/** `next` with the transition time of `previous` while the status is unchanged, as Kubernetes conventions ask. */
export function keepTransitionTime(previous: Condition | undefined, next: Condition): Condition {
  return previous && previous.status === next.status && previous.lastTransitionTime
    ? { ...next, lastTransitionTime: previous.lastTransitionTime }
    : next;
}

/** Status of Triad-validated objects: conditions only (`Accepted` says whether the spec passed validation). */
export const ResourceStatusSchema = z.object({ conditions: z.array(ConditionSchema).optional() });

const CONDITION_TYPE = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/;
const CONDITION_REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;

/**
 * `metav1.Condition` with the API server's own constraints, for the `status` of the generated CRDs (what
 * Triad's status writers produce). Reading conditions stays lenient ({@link ConditionSchema}): another
 * controller's odd condition must not make an object invalid.
 */
export const MetaConditionSchema = z.object({
  type: z.string().max(316).regex(CONDITION_TYPE),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: z.number().int().min(0).optional(),
  lastTransitionTime: z.string().meta({ format: 'date-time' }),
  reason: z.string().min(1).max(1024).regex(CONDITION_REASON),
  message: z.string().max(32768),
});
