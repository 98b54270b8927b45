import type { Pod } from '@triad/crd';

/** Pod annotations naming the engine's KV-event sockets (vLLM/SGLang `--kv-events-config` endpoint/replay_endpoint). */
export const KV_EVENTS_ENDPOINT_ANNOTATION = 'triad.io/kv-events-endpoint';
export const KV_EVENTS_REPLAY_ANNOTATION = 'triad.io/kv-events-replay-endpoint';
export const KV_EVENTS_RANKS_ANNOTATION = 'triad.io/kv-events-ranks';

export interface KvEventsPlacement {
  readonly endpoint: string;
  readonly replayEndpoint?: string;
  readonly ranks?: number;
}

// `tcp://host:port`, `tcp://*:port`, `:port` or `port`; the indexer puts the pod IP where the host is left out.
const ENDPOINT = /^(?:tcp:\/\/)?(?:\*|\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*)?:?\d{1,5}$/;

/**
 * The KV-event sockets a pod announces, or undefined when it announces none. A malformed value is ignored (the
 * pod is then scored by the approximate prefix scorer) and reported through `invalid` with the annotation named.
 */
export function kvEventsOf(pod: Pod, invalid?: (annotation: string, value: string) => void): KvEventsPlacement | undefined {
  const a = pod.metadata.annotations ?? {};
  const endpoint = a[KV_EVENTS_ENDPOINT_ANNOTATION]?.trim();
  if (!endpoint) return undefined;
  if (!ENDPOINT.test(endpoint)) {
    invalid?.(KV_EVENTS_ENDPOINT_ANNOTATION, endpoint);
    return undefined;
  }
  const out: { endpoint: string; replayEndpoint?: string; ranks?: number } = { endpoint };
  const replay = a[KV_EVENTS_REPLAY_ANNOTATION]?.trim();
  if (replay) {
    if (ENDPOINT.test(replay)) out.replayEndpoint = replay;
    else invalid?.(KV_EVENTS_REPLAY_ANNOTATION, replay);
  }
  const ranks = a[KV_EVENTS_RANKS_ANNOTATION]?.trim();
  if (ranks) {
    const n = Number(ranks);
    if (Number.isInteger(n) && n >= 1 && n <= 64) out.ranks = n;
    else invalid?.(KV_EVENTS_RANKS_ANNOTATION, ranks);
  }
  return out;
}
