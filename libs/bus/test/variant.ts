/**
 * A copy of `full` for the hand readers' tests against their schemas: each top-level field of `change` replaces its
 * own (undefined removes it). With `listKey`, an item field of that array set to undefined is removed too, as it
 * would be on the wire (JSON has no undefined).
 */
export function variantOf(full: Record<string, unknown>, change: Record<string, unknown>, listKey?: string): Record<string, unknown> {
  const out: Record<string, unknown> = structuredClone(full);
  for (const [k, v] of Object.entries(change)) {
    if (v === undefined) delete out[k];
    else out[k] = structuredClone(v);
  }
  const list = listKey === undefined ? undefined : out[listKey];
  if (Array.isArray(list))
    for (const item of list as unknown[])
      if (item !== null && typeof item === 'object' && !Array.isArray(item))
        for (const [k, v] of Object.entries(item)) if (v === undefined) delete (item as Record<string, unknown>)[k];
  return out;
}
