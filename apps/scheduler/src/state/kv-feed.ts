import { Buckets, EndpointRecordSchema, ModelServerRecordSchema, ScrapeFreshnessRecordSchema } from '@triad/bus';
import type { Bus } from '@triad/bus/client';
import type { EndpointIndex } from '@triad/scheduling';

/** The KV watches that keep the index current. */
export interface KvFeed {
  /** Resolves once both buckets' existing values are in the index. */
  readonly synced: Promise<void>;
  stop(): void;
}

/**
 * Follows the pod-watcher's endpoint, ModelServer and scrape-freshness buckets into the index: the current values
 * first, then every change, each applied incrementally (no rebuild). ModelServers are watched first so their
 * endpoints find a mode; freshness before endpoints so none is taken for stale while the replay runs.
 */
export async function startKvFeed(bus: Bus, index: EndpointIndex): Promise<KvFeed> {
  const servers = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
  const freshness = await bus.kv(Buckets.scrapeFreshness, ScrapeFreshnessRecordSchema);
  const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  const watches = [
    await servers.watch({ onChange: (change) => index.applyModelServer(change) }),
    await freshness.watch({ onChange: (change) => index.applyFreshness(change) }),
    await endpoints.watch({ onChange: (change) => index.applyEndpoint(change) }),
  ];
  return {
    synced: Promise.all(watches.map((w) => w.synced)).then(() => undefined),
    stop: () => {
      for (const w of watches) w.stop();
    },
  };
}
