/** Every NATS subject Triad uses. Versioned so a v2 contract can run beside v1 during an upgrade. */
export const Subjects = {
  /** Request-reply: a batch of scheduling requests → their decisions, in order. Served in a queue group. */
  schedule: 'triad.v1.schedule',
  /** Publish: gateways' dispatch start/finish events and in-flight snapshots; every scheduler replica reads all. */
  dispatch: 'triad.v1.dispatch',
  /** Publish: admission's lease reclaim/released messages between gateway replicas sharing a NATS budget store. */
  admissionLease: 'triad.v1.admission.lease',
  /** Publish: the KV indexers' block deltas per event source; every scheduler replica reads all. */
  kvIndexDelta: 'triad.v1.kvindex.delta',
  /** Publish: what each scheduling replica's decisions taught (prefix blocks, media, sessions); every replica reads all. */
  affinity: 'triad.v1.affinity',
  /**
   * Publish: pod-watcher replicas' membership heartbeats, `triad.v1.podwatcher.heartbeat.<lease key>`; the live
   * replicas of one watched scope split the scrape work among themselves (rendezvous hashing).
   */
  podWatcherHeartbeat: 'triad.v1.podwatcher.heartbeat',
} as const;

/** Queue group of the scheduler replicas: one of them answers each scheduling request. */
export const SCHEDULER_QUEUE_GROUP = 'schedulers';

/** JetStream KV buckets (names allow only [A-Za-z0-9_-]). */
export const Buckets = {
  /** One record per (pod, ModelServer): role, group, address, metrics. Key `ns.modelserver.pod`. */
  endpoints: 'triad_v1_endpoints',
  /** Validated ModelServer specs. Key `ns.name`. */
  modelServers: 'triad_v1_modelservers',
  /** Validated ModelRoute specs. Key `ns.name`. */
  modelRoutes: 'triad_v1_modelroutes',
  /** Operator-set configuration documents (e.g. key `scheduler`). */
  config: 'triad_v1_config',
  /** Admission's token budgets (default of the NATS budget store), one record per limit scope and window. */
  admission: 'triad_v1_admission',
  /** The pod-watcher's writer lease: one key per watched scope, held by the replica that writes. */
  podWatcherLease: 'triad_v1_podwatcher_lease',
  /** Validated ExternalModelProviders with their resolved auth and readiness (no secret). Key `ns.name`. */
  externalProviders: 'triad_v1_externalproviders',
  /**
   * Provider credentials, sealed (AES-256-GCM) with the key only the pod-watcher and the gateway hold. Key
   * `ns.provider`. Read by the gateway alone.
   */
  providerCredentials: 'triad_v1_provider_credentials',
  /**
   * ModelServers' engine credentials (`engineAuth.secretRef`): where each stands and, when it resolves, its value
   * sealed as provider credentials are. Key `ns.modelserver`. Read by the gateway alone.
   */
  engineCredentials: 'triad_v1_engine_credentials',
  /** Gateway API mode: Gateways of Triad's classes (and the default one), their HTTP listeners. Key `ns.name`. */
  gateways: 'triad_v1_gateways',
  /** Gateway API mode: HTTPRoutes attached to those Gateways, as Triad serves them. Key `ns.name`. */
  httpRoutes: 'triad_v1_httproutes',
  /** KV indexers' per-source state: `m.<source>` records and `c.<source>.<n>` snapshot chunks of block keys. */
  kvIndex: 'triad_v1_kvindex',
  /**
   * Each pod-watcher replica's scrape freshness (`ScrapeFreshnessRecord`, key `scrapeFreshnessKey(identity)`):
   * readers age the endpoint records a replica wrote by the later of their own scrape time and this.
   */
  scrapeFreshness: 'triad_v1_scrape_freshness',
  /** KV indexer replicas' heartbeats (key = instance id); pods are sharded over the live ones. */
  kvIndexers: 'triad_v1_kvindexers',
  /** Outlier ejection state per endpoint and stage (`OutlierRecord`), written by gateways with compare-and-set. */
  outliers: 'triad_v1_outliers',
} as const;
export type BucketName = (typeof Buckets)[keyof typeof Buckets];

/**
 * Buckets whose values expire (ms), whoever creates them: scrape-freshness records of pod-watcher replicas that are
 * gone (every rollout names new ones) leave the bucket after ten minutes; a live replica rewrites its own every
 * few seconds.
 */
export const BucketTtlMs: Readonly<Partial<Record<string, number>>> = { [Buckets.scrapeFreshness]: 600_000 };

/** Keys in the config bucket. */
export const ConfigKeys = { scheduler: 'scheduler' } as const;

// KV keys are dot-separated tokens. Kubernetes names may contain dots but never underscores, so a dot inside a
// name is written as an underscore: the mapping is reversible and keeps `ns.modelserver.>` watch filters exact.
const encodeToken = (name: string): string => name.replace(/\./g, '_');
const decodeToken = (token: string): string => token.replace(/_/g, '.');

/**
 * KV key of a pod-watcher replica's scrape-freshness record: its identity (a pod name) with every character a KV key
 * does not allow as `_`. Readers go by the record's `replica` field, so two identities sharing a key only cost the
 * one written later its freshness, never a wrong one.
 */
export function scrapeFreshnessKey(identity: string): string {
  return identity.replace(/[^A-Za-z0-9_=-]/g, '_') || '_';
}

/** KV key of an endpoint record: `ns.modelserver.pod`. */
export function endpointKey(namespace: string, modelServer: string, pod: string): string {
  return `${encodeToken(namespace)}.${encodeToken(modelServer)}.${encodeToken(pod)}`;
}

/** KV watch filter for every endpoint of one ModelServer. */
export function endpointKeyFilter(namespace: string, modelServer: string): string {
  return `${encodeToken(namespace)}.${encodeToken(modelServer)}.>`;
}

/** Inverse of {@link endpointKey}; undefined when the key is not of that shape. */
export function parseEndpointKey(key: string): { namespace: string; modelServer: string; pod: string } | undefined {
  const parts = key.split('.');
  if (parts.length !== 3 || parts.some((p) => p === '')) return undefined;
  const [namespace, modelServer, pod] = parts.map(decodeToken) as [string, string, string];
  return { namespace, modelServer, pod };
}

/** KV key of a namespaced object (ModelServer, ModelRoute): `ns.name`. */
export function objectKey(namespace: string, name: string): string {
  return `${encodeToken(namespace)}.${encodeToken(name)}`;
}

/** Inverse of {@link objectKey}. */
export function parseObjectKey(key: string): { namespace: string; name: string } | undefined {
  const parts = key.split('.');
  if (parts.length !== 2 || parts.some((p) => p === '')) return undefined;
  return { namespace: decodeToken(parts[0]), name: decodeToken(parts[1]) };
}

const POOL_PREFIX = 'inferencepool=';

/**
 * The ModelServer name under which an InferencePool's endpoints (and its synthesized ModelServer record) are
 * published, so the scheduler treats the pool as an aggregated ModelServer. `=` never occurs in a Kubernetes
 * name, so it cannot clash with a real ModelServer.
 */
export function inferencePoolServerName(pool: string): string {
  return `${POOL_PREFIX}${pool}`;
}

/** The InferencePool behind a ModelServer name from {@link inferencePoolServerName}, or undefined. */
export function parseInferencePoolServerName(modelServer: string): string | undefined {
  return modelServer.startsWith(POOL_PREFIX) ? modelServer.slice(POOL_PREFIX.length) : undefined;
}
