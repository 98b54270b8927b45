import { API_GROUP, PROVIDER_SECRET_LABEL_KEY, PROVIDER_SECRET_LABEL_VALUE } from '@triad/crd';
import type { Logger } from '@triad/runtime';
import type { WatchedKind } from '../../inventory/inventory';
import type { StatusKind } from '../../inventory/status-reporter';
import type { WatcherMetrics } from '../../ops/metrics';
import type { ObjectSource, SourceSink } from '../source';
import { trimCachedPod } from './cached-pod';
import { InformerRunner } from './informer-runner';
import { KubeStatusWriter } from './status-writer';

type K8s = typeof import('@kubernetes/client-node');
type KubeObject = import('@kubernetes/client-node').KubernetesObject;
type KubeList = import('@kubernetes/client-node').KubernetesListObject<KubeObject>;

/** One watched resource: where it lives in the API and how it is listed. */
interface Resource {
  readonly kind: WatchedKind;
  /** `''` for the core group. */
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly namespaced: boolean;
  /**
   * The watcher is ready without it while the API server does not serve it (404: its CRD is not installed, e.g.
   * Kthena v1.0's CRDs lack ExternalModelProvider); it keeps retrying and picks it up once it is.
   */
  readonly optional: boolean;
  readonly labelSelector?: string;
}

const triad = (kind: WatchedKind, plural: string, optional = false): Resource => ({
  kind,
  group: API_GROUP,
  version: 'v1alpha1',
  plural,
  namespaced: true,
  optional,
});
const CREDENTIAL_SELECTOR = `${PROVIDER_SECRET_LABEL_KEY}=${PROVIDER_SECRET_LABEL_VALUE}`;

/** What the kube source watches: Triad's kinds, Pods and labelled Secrets; with Gateway API mode, its kinds too. */
export function watchedResources(gatewayApi: boolean, scoped: boolean): Resource[] {
  const out: Resource[] = [
    triad('ModelServer', 'modelservers'),
    triad('ModelRoute', 'modelroutes'),
    triad('ExternalModelProvider', 'externalmodelproviders', true),
    { kind: 'Pod', group: '', version: 'v1', plural: 'pods', namespaced: true, optional: false },
    // Only Secrets labelled as credentials are listed (Kthena's label: provider credentials, and the Secrets
    // ModelServers name in engineAuth.secretRef), never the others.
    { kind: 'Secret', group: '', version: 'v1', plural: 'secrets', namespaced: true, optional: false, labelSelector: CREDENTIAL_SELECTOR },
  ];
  if (gatewayApi) {
    out.push(
      { kind: 'Gateway', group: 'gateway.networking.k8s.io', version: 'v1', plural: 'gateways', namespaced: true, optional: true },
      { kind: 'HTTPRoute', group: 'gateway.networking.k8s.io', version: 'v1', plural: 'httproutes', namespaced: true, optional: true },
      {
        kind: 'InferencePool',
        group: 'inference.networking.k8s.io',
        version: 'v1',
        plural: 'inferencepools',
        namespaced: true,
        optional: true,
      },
    );
    // Namespace labels serve `allowedRoutes.namespaces.from: Selector`; listing them needs cluster scope.
    if (!scoped) out.push({ kind: 'Namespace', group: '', version: 'v1', plural: 'namespaces', namespaced: false, optional: false });
  }
  return out;
}

const STATUS_RESOURCES: Readonly<Record<StatusKind, { group: string; version: string; plural: string }>> = {
  ModelServer: { group: API_GROUP, version: 'v1alpha1', plural: 'modelservers' },
  ModelRoute: { group: API_GROUP, version: 'v1alpha1', plural: 'modelroutes' },
  ExternalModelProvider: { group: API_GROUP, version: 'v1alpha1', plural: 'externalmodelproviders' },
  HTTPRoute: { group: 'gateway.networking.k8s.io', version: 'v1', plural: 'httproutes' },
};

export interface KubeSourceOptions {
  /** Namespaces to watch; empty = all (one cluster-wide informer per kind). */
  readonly namespaces: readonly string[];
  /** Kubeconfig file; else KUBECONFIG, ~/.kube/config, or the in-cluster service account. */
  readonly kubeconfig?: string;
  /** Gateway API mode: also Gateways, HTTPRoutes, InferencePools and Namespaces. */
  readonly gatewayApi?: boolean;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
}

/**
 * `--source kube`: client-node informers (list + watch with resourceVersion) on the watched resources in the
 * watched namespaces, and the status writer for Triad's kinds and HTTPRoutes. @kubernetes/client-node is loaded
 * here, on first use, because it costs about a second of start-up and the file source (the local stack) never
 * needs it.
 */
export class KubeSource implements ObjectSource {
  readonly status: KubeStatusWriter;
  readonly #opts: KubeSourceOptions;
  readonly #k8s: K8s;
  readonly #kc: import('@kubernetes/client-node').KubeConfig;
  readonly #runners: InformerRunner[] = [];

  constructor(options: KubeSourceOptions) {
    this.#opts = options;
    this.#k8s = require('@kubernetes/client-node') as K8s;
    this.#kc = new this.#k8s.KubeConfig();
    if (options.kubeconfig) this.#kc.loadFromFile(options.kubeconfig);
    else this.#kc.loadFromDefault();
    const custom = this.#kc.makeApiClient(this.#k8s.CustomObjectsApi);
    const mergePatch = this.#k8s.setHeaderOptions('Content-Type', this.#k8s.PatchStrategy.MergePatch);
    this.status = new KubeStatusWriter(
      async (kind, namespace, name, status) => {
        const r = STATUS_RESOURCES[kind];
        return custom.patchNamespacedCustomObjectStatus({ ...r, namespace, name, body: { status } }, mergePatch) as Promise<unknown>;
      },
      options.logger,
      options.metrics,
    );
  }

  /** Where the API server is (for the start-up log line). */
  get server(): string | undefined {
    return this.#kc.getCurrentCluster()?.server;
  }

  async start(sink: SourceSink): Promise<void> {
    const scopes: (string | undefined)[] = this.#opts.namespaces.length > 0 ? [...this.#opts.namespaces] : [undefined];
    for (const res of watchedResources(this.#opts.gatewayApi ?? false, this.#opts.namespaces.length > 0)) {
      const apiVersion = res.group ? `${res.group}/${res.version}` : res.version;
      for (const namespace of res.namespaced ? scopes : [undefined]) {
        const informer = this.#informer(res, namespace);
        // Lists come back as typed objects (Date fields) without apiVersion/kind; watch events as plain JSON.
        // Both are normalised to what a manifest says, the shape libs/crd validates.
        const plain = (o: KubeObject) => ({ ...(JSON.parse(JSON.stringify(o)) as object), apiVersion, kind: res.kind });
        // Pods are trimmed where the informer caches them (cached-pod.ts): tens of KB each as served. A trimmed pod
        // is plain data already; handed on as it is, the inventory's copy shares its strings with the cache's.
        const take =
          res.kind === 'Pod'
            ? (o: KubeObject) => sink.upsert({ ...trimCachedPod(o), apiVersion, kind: res.kind })
            : (o: KubeObject) => sink.upsert(plain(o));
        informer.on('add', take);
        informer.on('update', take);
        informer.on('delete', (o) =>
          sink.remove(res.kind, o.metadata?.namespace ?? (res.namespaced ? 'default' : ''), o.metadata?.name ?? ''),
        );
        const name = `${res.plural}${namespace ? `@${namespace}` : ''}`;
        this.#runners.push(new InformerRunner(name, informer, this.#opts.logger, { optional: res.optional }));
      }
    }
    await Promise.all(this.#runners.map((r) => r.start()));
  }

  async close(): Promise<void> {
    this.status.close();
    await Promise.all(this.#runners.map((r) => r.stop()));
  }

  #informer(res: Resource, namespace: string | undefined) {
    const k8s = this.#k8s;
    const kc = this.#kc;
    const labelSelector = res.labelSelector;
    const base = res.group ? `/apis/${res.group}/${res.version}` : `/api/${res.version}`;
    const path = namespace ? `${base}/namespaces/${namespace}/${res.plural}` : `${base}/${res.plural}`;
    type Page = { limit: number; _continue?: string };
    let listPage: (page: Page) => Promise<KubeList>;
    if (!res.group) {
      const core = kc.makeApiClient(k8s.CoreV1Api);
      const sel = labelSelector ? { labelSelector } : {};
      if (res.kind === 'Pod') {
        listPage = (page) =>
          namespace ? core.listNamespacedPod({ namespace, ...sel, ...page }) : core.listPodForAllNamespaces({ ...sel, ...page });
      } else if (res.kind === 'Secret') {
        listPage = (page) =>
          namespace ? core.listNamespacedSecret({ namespace, ...sel, ...page }) : core.listSecretForAllNamespaces({ ...sel, ...page });
      } else {
        listPage = (page) => core.listNamespace({ ...sel, ...page });
      }
    } else {
      const custom = kc.makeApiClient(k8s.CustomObjectsApi);
      const what = { group: res.group, version: res.version, plural: res.plural };
      listPage = (page) =>
        (namespace
          ? custom.listNamespacedCustomObject({ ...what, namespace, ...page })
          : custom.listClusterCustomObject({ ...what, ...page })) as Promise<KubeList>;
    }
    const trim = res.kind === 'Pod' ? trimCachedPod : undefined;
    return k8s.makeInformer<KubeObject>(kc, path, () => listInPages(listPage, trim), labelSelector);
  }
}

/** Objects per list page: what Go's reflector asks for. */
const LIST_PAGE_SIZE = 500;

/**
 * A whole list, read in pages of {@link LIST_PAGE_SIZE} (`limit` and `continue`, as Go's reflector lists), each
 * page's items trimmed (`trim`) before the next is read. One response with 10,000 pods as a cluster serves them
 * is ~45 MB of JSON and several times that as objects at once; the heap grown for it stayed with the process.
 * The list carries the first page's resourceVersion, from which the watch starts (the API server serves every
 * page from that snapshot). A continue token that expired meanwhile (410) fails the list: the informer lists again.
 */
export async function listInPages(
  listPage: (page: { limit: number; _continue?: string }) => Promise<KubeList>,
  trim?: (o: KubeObject) => KubeObject,
): Promise<KubeList> {
  const items: KubeObject[] = [];
  let first: KubeList | undefined;
  let token: string | undefined;
  do {
    const page = await listPage(token === undefined ? { limit: LIST_PAGE_SIZE } : { limit: LIST_PAGE_SIZE, _continue: token });
    first ??= page;
    for (const item of page.items) items.push(trim ? trim(item) : item);
    // Typed lists (core kinds) name it `_continue`, the plain JSON of custom objects `continue`.
    const meta: { _continue?: string; continue?: string } | undefined = page.metadata;
    token = meta?._continue || meta?.continue || undefined;
  } while (token !== undefined);
  return { ...first, metadata: { resourceVersion: first.metadata?.resourceVersion }, items };
}
