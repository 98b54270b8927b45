import type { Endpoint } from '../state/endpoint';

/**
 * The candidates for which `keep` holds. Returns the input array itself when every candidate is kept, so a filter
 * that removes nothing (the common case) allocates nothing.
 */
export function keepWhere(candidates: readonly Endpoint[], keep: (e: Endpoint) => boolean): readonly Endpoint[] {
  let i = 0;
  while (i < candidates.length && keep(candidates[i] as Endpoint)) i++;
  if (i === candidates.length) return candidates;
  const kept = candidates.slice(0, i);
  for (i++; i < candidates.length; i++) {
    const e = candidates[i] as Endpoint;
    if (keep(e)) kept.push(e);
  }
  return kept;
}
