import type { DecisionOrError, DispatchBatch, DispatchEvent, SchedulingRequest } from '@triad/bus';
import type { PluginRegistry } from '../framework/registry';
import type { SchedulingObserver } from '../planning/profile-run';
import { createInTreeRegistry } from '../plugins/in-tree';
import { Scheduler } from '../scheduler';
import { EndpointIndex, type EndpointChange, type ModelServerChange, type ScrapeFreshnessChange } from '../state/endpoint-index';
import { InflightTracker, type InflightTrackerOptions } from '../state/inflight-tracker';
import { KeyAgreement } from '../state/key-agreement';
import { KvBlockIndex } from '../state/kv-block-index';
import { OutlierTable } from '../state/outlier-table';
import { ReplicaConfig, type ActiveConfig, type ReplicaConfigOptions } from './replica-config';

interface SchedulerReplicaOptions {
  /** Written into `Decision.decidedBy`. */
  readonly instanceId?: string | undefined;
  /** Plugin types; defaults to the in-tree ones over `kvIndex` (and the replica's key agreement). */
  readonly registry?: PluginRegistry | undefined;
  /** Engines' KV blocks for `precise-prefix-cache` (the caller feeds it); pass the one a custom registry uses. */
  readonly kvIndex?: KvBlockIndex | undefined;
  readonly tracker?: InflightTrackerOptions | undefined;
  /** Shared outlier state (the caller feeds it from the outliers bucket); a new table when absent. */
  readonly outliers?: OutlierTable | undefined;
  /** Plugin timings and phases (the scheduler service's metrics and spans). */
  readonly observer?: SchedulingObserver | undefined;
  readonly log?: ReplicaConfigOptions['log'];
  readonly onReload?: ReplicaConfigOptions['onReload'];
  readonly onApplied?: ReplicaConfigOptions['onApplied'];
}

/**
 * One scheduling replica, as the scheduler service runs it and as the gateway runs it in process (or as its
 * fallback): the views fed from KV (endpoints, ModelServers, scrape freshness), in-flight counts from dispatch
 * events, the engines' KV blocks, outlier state, and the config chosen KV > file > defaults. The caller feeds it
 * (KV watches, the file watch, NATS feeds); the replica holds no connection.
 */
export class SchedulerReplica {
  readonly index = new EndpointIndex();
  readonly tracker: InflightTracker;
  readonly kvIndex: KvBlockIndex;
  /** How many of the gateways' block keys the engines hold, per ModelServer (precise-prefix-cache). */
  readonly keyAgreement: KeyAgreement;
  readonly registry: PluginRegistry;
  readonly outliers: OutlierTable;
  readonly scheduler: Scheduler;
  readonly config: ReplicaConfig;

  constructor(options: SchedulerReplicaOptions = {}) {
    this.kvIndex = options.kvIndex ?? new KvBlockIndex();
    this.keyAgreement = new KeyAgreement(this.kvIndex);
    this.registry = options.registry ?? createInTreeRegistry({ kvIndex: this.kvIndex, keyAgreement: this.keyAgreement });
    this.tracker = new InflightTracker(options.tracker);
    this.outliers = options.outliers ?? new OutlierTable();
    this.scheduler = new Scheduler({
      index: this.index,
      tracker: this.tracker,
      registry: this.registry,
      outliers: this.outliers,
      ...(options.instanceId ? { instanceId: options.instanceId } : {}),
      ...(options.observer ? { observer: options.observer } : {}),
    });
    this.config = new ReplicaConfig({
      scheduler: this.scheduler,
      registry: this.registry,
      log: options.log,
      onReload: options.onReload,
      onApplied: options.onApplied,
    });
  }

  get activeConfig(): ActiveConfig {
    return this.config.active;
  }

  applyEndpoint(change: EndpointChange): void {
    this.index.applyEndpoint(change);
  }

  applyModelServer(change: ModelServerChange): void {
    this.index.applyModelServer(change);
  }

  applyFreshness(change: ScrapeFreshnessChange): void {
    this.index.applyFreshness(change);
  }

  applyDispatch(batch: DispatchBatch, now = Date.now()): void {
    this.tracker.applyBatch(batch, now);
  }

  /** One gateway's leg event, applied as it happens (a gateway's own legs, without waiting for its batch). */
  applyDispatchEvent(gateway: string, event: DispatchEvent): void {
    this.tracker.applyEvent(gateway, event);
  }

  schedule(request: SchedulingRequest, now?: number): DecisionOrError {
    return this.scheduler.schedule(request, now);
  }

  close(): void {
    this.scheduler.close();
  }
}
