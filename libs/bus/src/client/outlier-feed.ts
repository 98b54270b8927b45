import { Buckets } from '../names';
import { OutlierRecordSchema, type OutlierRecord } from '../outliers';
import type { Bus } from './bus';
import type { KvChange, TypedKv } from './typed-kv';

/** The outliers bucket, followed: its records go to `apply`; `kv` writes transitions (gateways only). */
export interface OutlierFeed {
  readonly kv: TypedKv<typeof OutlierRecordSchema>;
  /** Resolves once the bucket's current records have been applied. */
  readonly synced: Promise<void>;
  stop(): void;
}

/** Follows the outliers bucket into `apply` (every gateway and scheduler replica does, so all skip the same endpoints). */
export async function startOutlierFeed(bus: Bus, apply: (change: KvChange<OutlierRecord>) => void): Promise<OutlierFeed> {
  const kv = await bus.kv(Buckets.outliers, OutlierRecordSchema);
  const watch = await kv.watch({ onChange: apply });
  return { kv, synced: watch.synced, stop: () => watch.stop() };
}
