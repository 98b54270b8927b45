import type { DispatchBatch, SchedulingRequest, DecisionOrError } from '@triad/bus';
import { defaultSchedulerConfig } from './config/default-config';
import { loadSchedulerConfig, type LoadedSchedulerConfig } from './config/load-config';
import type { PluginRegistry } from './framework/registry';
import { createInTreeRegistry } from './plugins/in-tree';
import { Scheduler } from './scheduler';
import { EndpointIndex, type EndpointChange, type ModelServerChange, type ScrapeFreshnessChange } from './state/endpoint-index';
import { InflightTracker, type InflightTrackerOptions } from './state/inflight-tracker';
import { KvBlockIndex } from './state/kv-block-index';
import { KeyAgreement } from './state/key-agreement';
import { OutlierTable } from './state/outlier-table';

export interface LocalSchedulingOptions {
  readonly registry?: PluginRegistry;
  readonly tracker?: InflightTrackerOptions;
  readonly instanceId?: string;
  /** Engines' KV blocks for `precise-prefix-cache` (the caller feeds it); an empty index when absent. */
  readonly kvIndex?: KvBlockIndex;
  /** Shared outlier state to honour (the caller feeds it from the outliers bucket). */
  readonly outliers?: OutlierTable;
}

/**
 * Everything a process needs to schedule on its own, wired together: what the gateway's local fallback holds.
 * Feed it KV changes and dispatch batches; `reloadConfig` takes a YAML string or object and keeps the running
 * config when the new one is invalid.
 */
export interface LocalScheduling {
  readonly index: EndpointIndex;
  readonly tracker: InflightTracker;
  readonly scheduler: Scheduler;
  readonly registry: PluginRegistry;
  readonly kvIndex: KvBlockIndex;
  /** How many of the gateway's block keys the engines hold, per ModelServer (precise-prefix-cache). */
  readonly keyAgreement: KeyAgreement;
  readonly outliers: OutlierTable;
  applyEndpoint(change: EndpointChange): void;
  applyModelServer(change: ModelServerChange): void;
  applyFreshness(change: ScrapeFreshnessChange): void;
  applyDispatch(batch: DispatchBatch, now?: number): void;
  schedule(request: SchedulingRequest, now?: number): DecisionOrError;
  /** Loads and switches to a config; on failure returns the reasons and keeps the running one. */
  reloadConfig(input: unknown): { ok: true; config: LoadedSchedulerConfig } | { ok: false; reasons: string[] };
}

/** Creates an index, an in-flight tracker and a scheduler with the default config (in-tree plugins). */
export function createLocalScheduling(options: LocalSchedulingOptions = {}): LocalScheduling {
  const kvIndex = options.kvIndex ?? new KvBlockIndex();
  const keyAgreement = new KeyAgreement(kvIndex);
  const registry = options.registry ?? createInTreeRegistry({ kvIndex, keyAgreement });
  const index = new EndpointIndex();
  const tracker = new InflightTracker(options.tracker);
  const initial = loadSchedulerConfig(defaultSchedulerConfig(), { registry });
  if (!initial.ok) throw new Error(`default scheduler config does not load: ${initial.reasons.join('; ')}`);
  const outliers = options.outliers ?? new OutlierTable();
  const scheduler = new Scheduler({
    index,
    tracker,
    config: initial.loaded,
    outliers,
    ...(options.instanceId ? { instanceId: options.instanceId } : {}),
  });
  return {
    index,
    tracker,
    scheduler,
    registry,
    kvIndex,
    keyAgreement,
    outliers,
    applyEndpoint: (c) => index.applyEndpoint(c),
    applyModelServer: (c) => index.applyModelServer(c),
    applyFreshness: (c) => index.applyFreshness(c),
    applyDispatch: (b, now = Date.now()) => tracker.applyBatch(b, now),
    schedule: (r, now) => scheduler.schedule(r, now),
    reloadConfig: (input) => {
      const result = loadSchedulerConfig(input, { registry, previous: scheduler.config });
      if (!result.ok) return result;
      scheduler.setConfig(result.loaded);
      return { ok: true, config: result.loaded };
    },
  };
}
