import { hashString32 } from './fast-hash';

/**
 * Rendezvous (highest random weight) hashing: the member with the highest `hashString32(key + NUL + member)` owns
 * `key`; equal weights (practically never) go to the smaller name. Every replica computes the same owner from the
 * same member list, and when a member joins or leaves only the keys it wins or held move (about 1/N of them).
 * The pod-watchers' shard ring and the KV-event indexers both use this one function. Undefined when there are no
 * members.
 */
export function rendezvousOwner(key: string, members: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestWeight = -1;
  for (const m of members) {
    const weight = hashString32(`${key}\u0000${m}`);
    if (weight > bestWeight || (weight === bestWeight && best !== undefined && m < best)) {
      best = m;
      bestWeight = weight;
    }
  }
  return best;
}
