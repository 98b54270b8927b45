import { Buckets, EndpointRecordSchema, ModelServerRecordSchema } from '@triad/bus';
import type { Bus } from '@triad/bus/client';
import type { EndpointIndex } from '@triad/scheduling';

/** The KV watches that keep the index current. */
export interface KvFeed {
  /** Resolves once both buckets' existing values are in the index. */
  readonly synced: Promise<void>;
  stop(): void;
}

/**
 * Follows the pod-watcher's endpoint and ModelServer buckets into the index: the current values first, then every
 * change, each applied incrementally (no rebuild). ModelServers are watched first so their endpoints find a mode.
 */
export async function startKvFeed(bus: Bus, index: EndpointIndex): Promise<KvFeed> {
  const servers = await bus.kv(Buckets.modelServers, ModelServerRecordSchema);
  const endpoints = await bus.kv(Buckets.endpoints, EndpointRecordSchema);
  const serverWatch = await servers.watch({ onChange: (change) => index.applyModelServer(change) });
  const endpointWatch = await endpoints.watch({ onChange: (change) => index.applyEndpoint(change) });
  return {
    synced: Promise.all([serverWatch.synced, endpointWatch.synced]).then(() => undefined),
    stop: () => {
      serverWatch.stop();
      endpointWatch.stop();
    },
  };
}
