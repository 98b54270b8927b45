import type { StatusReporter, WatchedKind } from '../inventory/inventory';

/** Where a source delivers objects (the inventory validates them). */
export interface SourceSink {
  /** A new or changed object, as received. */
  upsert(raw: unknown): void;
  /** The object is gone. */
  remove(kind: WatchedKind, namespace: string, name: string): void;
}

/** Something that knows the ModelServers, ModelRoutes and Pods: the Kubernetes API or a YAML file. */
export interface ObjectSource {
  /** Starts delivering; resolves once the first full state has been delivered to `sink`. */
  start(sink: SourceSink): Promise<void>;
  /** Writes the `Accepted` status condition (sources backed by an API server only). */
  readonly status?: StatusReporter;
  close(): Promise<void>;
}
