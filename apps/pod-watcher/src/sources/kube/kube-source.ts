import { API_GROUP, type Condition } from '@triad/crd';
import type { Logger } from '@triad/runtime';
import type { WatchedKind } from '../../inventory/inventory';
import type { WatcherMetrics } from '../../ops/metrics';
import type { ObjectSource, SourceSink } from '../source';
import { InformerRunner } from './informer-runner';
import { KubeStatusWriter } from './status-writer';

type K8s = typeof import('@kubernetes/client-node');
type KubeObject = import('@kubernetes/client-node').KubernetesObject;

const VERSION = 'v1alpha1';
const TRIAD_API_VERSION = `${API_GROUP}/${VERSION}`;

/** The three watched kinds and where they live in the API. */
const RESOURCES: readonly { kind: WatchedKind; apiVersion: string; plural: string }[] = [
  { kind: 'ModelServer', apiVersion: TRIAD_API_VERSION, plural: 'modelservers' },
  { kind: 'ModelRoute', apiVersion: TRIAD_API_VERSION, plural: 'modelroutes' },
  { kind: 'Pod', apiVersion: 'v1', plural: 'pods' },
];

export interface KubeSourceOptions {
  /** Namespaces to watch; empty = all (one cluster-wide informer per kind). */
  readonly namespaces: readonly string[];
  /** Kubeconfig file; else KUBECONFIG, ~/.kube/config, or the in-cluster service account. */
  readonly kubeconfig?: string;
  readonly logger: Logger;
  readonly metrics?: WatcherMetrics;
}

/**
 * `--source kube`: client-node informers (list + watch with resourceVersion) on ModelServers, ModelRoutes and
 * Pods in the watched namespaces, and the `Accepted` condition written to the two Triad kinds' status.
 * @kubernetes/client-node is loaded here, on first use, because it costs about a second of start-up and the file
 * source (the local stack) never needs it.
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
    this.status = new KubeStatusWriter(async (kind, namespace, name, conditions: Condition[]) => {
      await custom.patchNamespacedCustomObjectStatus(
        {
          group: API_GROUP, version: VERSION, namespace, plural: kind === 'ModelServer' ? 'modelservers' : 'modelroutes', name,
          body: { status: { conditions } },
        },
        mergePatch,
      );
    }, options.logger, options.metrics);
  }

  /** Where the API server is (for the start-up log line). */
  get server(): string | undefined {
    return this.#kc.getCurrentCluster()?.server;
  }

  async start(sink: SourceSink): Promise<void> {
    const scopes: (string | undefined)[] = this.#opts.namespaces.length > 0 ? [...this.#opts.namespaces] : [undefined];
    for (const res of RESOURCES) {
      for (const namespace of scopes) {
        const informer = this.#informer(res, namespace);
        // Lists come back as typed objects (Date fields) without apiVersion/kind; watch events as plain JSON.
        // Both are normalised to what a manifest says, the shape libs/crd validates.
        const plain = (o: KubeObject) => ({ ...(JSON.parse(JSON.stringify(o)) as object), apiVersion: res.apiVersion, kind: res.kind });
        informer.on('add', (o) => sink.upsert(plain(o)));
        informer.on('update', (o) => sink.upsert(plain(o)));
        informer.on('delete', (o) => sink.remove(res.kind, o.metadata?.namespace ?? 'default', o.metadata?.name ?? ''));
        this.#runners.push(new InformerRunner(`${res.plural}${namespace ? `@${namespace}` : ''}`, informer, this.#opts.logger));
      }
    }
    await Promise.all(this.#runners.map((r) => r.start()));
  }

  async close(): Promise<void> {
    this.status.close();
    await Promise.all(this.#runners.map((r) => r.stop()));
  }

  #informer(res: (typeof RESOURCES)[number], namespace: string | undefined) {
    const k8s = this.#k8s;
    const kc = this.#kc;
    if (res.kind === 'Pod') {
      const core = kc.makeApiClient(k8s.CoreV1Api);
      const path = namespace ? `/api/v1/namespaces/${namespace}/pods` : '/api/v1/pods';
      type PodList = Promise<import('@kubernetes/client-node').KubernetesListObject<KubeObject>>;
      return k8s.makeInformer<KubeObject>(
        kc, path, () => (namespace ? core.listNamespacedPod({ namespace }) : core.listPodForAllNamespaces()) as PodList,
      );
    }
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const path = namespace
      ? `/apis/${API_GROUP}/${VERSION}/namespaces/${namespace}/${res.plural}` : `/apis/${API_GROUP}/${VERSION}/${res.plural}`;
    const list = () => (namespace
      ? custom.listNamespacedCustomObject({ group: API_GROUP, version: VERSION, namespace, plural: res.plural })
      : custom.listClusterCustomObject({
        group: API_GROUP, version: VERSION, plural: res.plural,
      })) as Promise<import('@kubernetes/client-node').KubernetesListObject<KubeObject>>;
    return k8s.makeInformer<KubeObject>(kc, path, list);
  }
}
