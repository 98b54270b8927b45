/**
 * Schema metadata read only by the CRD generator. Triad's zod schemas are what `triad validate`, the webhook
 * and the pod-watcher check, with Triad's own messages; a few fields must still be `required` in the generated
 * CRD because Kthena's published schema requires them (the API server then refuses objects without them). Such
 * a field stays optional in zod, where a semantic rule or a warning explains it, and carries this marker, which
 * the generator turns into an entry of the parent's `required` list.
 */
export const CRD_REQUIRED = 'x-triad-crd-required';

/** `.meta(crdRequired)`: the generated CRD lists this field as required. */
export const crdRequired = { [CRD_REQUIRED]: true } as const;

/**
 * The opposite: zod requires the field (Triad refuses objects without it, with its message), but Kthena's CRD
 * does not, so the generated CRD must not either.
 */
export const CRD_OPTIONAL = 'x-triad-crd-optional';

/** `.meta(crdOptional)`: the generated CRD leaves this field out of its parent's `required` list. */
export const crdOptional = { [CRD_OPTIONAL]: true } as const;
