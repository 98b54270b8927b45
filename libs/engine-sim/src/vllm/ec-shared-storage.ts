import type { SimCounters } from '../counters';
import type { EcConnector } from './ec-connector';
import type { EcStore } from './ec-store';
import type { DistinctItem } from './mm-features';

const NO_FIELDS: Readonly<Record<string, unknown>> = Object.freeze({});

/**
 * ECExampleConnector: the encoder saves `<dir>/<identifier>/encoder_cache.safetensors`; a consumer loads the file
 * when it exists and encodes locally otherwise. Nothing travels in the request: the keys must simply agree (same
 * media or uuid, same processing kwargs) and both sides must mount the same directory.
 */
export class SharedStorageEcConnector implements EcConnector {
  constructor(
    private readonly store: EcStore,
    private readonly counters: SimCounters,
  ) {}

  async publish(items: readonly DistinctItem[]): Promise<ReadonlyMap<string, Readonly<Record<string, unknown>>>> {
    const fields = new Map<string, Readonly<Record<string, unknown>>>();
    for (const { feature } of items) {
      if (await this.store.write(feature.identifier, feature.tokens)) this.counters.inc('ecWrites');
      fields.set(feature.identifier, NO_FIELDS);
    }
    return fields;
  }

  async acquire(items: readonly DistinctItem[]): Promise<ReadonlySet<string>> {
    const found = new Set<string>();
    // Without a shared directory nothing can hit, so the lookups are skipped.
    if (!this.store.enabled) return found;
    for (const { feature } of items) if (this.store.has(feature.identifier)) found.add(feature.identifier);
    return found;
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {}
}
