import type { GatewayRecord, HttpRouteRecord, ListenerRef } from '@triad/bus';
import type { InferencePool, ModelRoute } from '@triad/crd';
import type { Inventory } from '../inventory/inventory';
import type { StatusReporter } from '../inventory/status-reporter';
import type { KvPublisher } from '../publish/kv-publisher';
import { buildGatewayApiModel, type DefaultGateway, type GatewayApiModel } from './model';

export interface GatewayApiSyncOptions {
  readonly inventory: Inventory;
  readonly gateways: KvPublisher<GatewayRecord>;
  readonly httpRoutes: KvPublisher<HttpRouteRecord>;
  readonly status?: StatusReporter;
  readonly classes: ReadonlySet<string>;
  readonly defaultGateway?: DefaultGateway;
  readonly now?: () => Date;
}

/**
 * Gateway API mode: recomputes the whole model (Gateways, HTTPRoutes, ModelRoute attachments) whenever a
 * Gateway, HTTPRoute, InferencePool, ModelRoute or Namespace changes. Those objects number in the tens or
 * hundreds, so a full pass is cheaper than tracking dependencies between them; KV writes happen only for
 * records that changed.
 */
export class GatewayApiSync {
  readonly #opts: GatewayApiSyncOptions;
  #dirty = true;
  #model: GatewayApiModel | undefined;
  /** Routes whose status Triad wrote entries into (to clear them when a route stops naming Triad's Gateways). */
  #reported = new Set<string>();

  constructor(options: GatewayApiSyncOptions) {
    this.#opts = options;
  }

  markDirty(): void {
    this.#dirty = true;
  }

  get pending(): boolean {
    return this.#dirty;
  }

  /** The InferencePools of a namespace (published as ModelServers). */
  pools(namespace?: string): InferencePool[] {
    return this.#opts.inventory.list('InferencePool', namespace);
  }

  /** The listeners a ModelRoute is attached to, as of the last pass. */
  listenersOf(route: ModelRoute): ListenerRef[] {
    return [...(this.#model?.modelRouteListeners.get(`${route.metadata.namespace}/${route.metadata.name}`) ?? [])];
  }

  /** Applies a pending change; returns true when ModelRoute attachments may have changed. */
  flush(): boolean {
    if (!this.#dirty) return false;
    this.#dirty = false;
    const { inventory, gateways, httpRoutes, status } = this.#opts;
    const model = buildGatewayApiModel({
      classes: this.#opts.classes,
      ...(this.#opts.defaultGateway ? { defaultGateway: this.#opts.defaultGateway } : {}),
      gateways: inventory.list('Gateway'),
      httpRoutes: inventory.list('HTTPRoute'),
      pools: inventory.list('InferencePool'),
      modelRoutes: inventory.modelRoutes(),
      namespaceLabels: (ns) => inventory.namespaceLabels(ns),
      now: (this.#opts.now ?? (() => new Date()))(),
    });
    for (const key of [...gateways.keys()]) if (!model.gateways.has(key)) gateways.remove(key);
    for (const [key, record] of model.gateways) gateways.set(key, record);
    for (const key of [...httpRoutes.keys()]) if (!model.httpRoutes.has(key)) httpRoutes.remove(key);
    for (const [key, record] of model.httpRoutes) httpRoutes.set(key, record);
    if (status) {
      const reported = new Set<string>();
      for (const [id, parents] of model.routeParents) {
        const [ns, name] = id.split('/') as [string, string];
        const observed = inventory.observed('HTTPRoute', ns, name);
        if (observed) status.routeParents(ns, name, parents, observed);
        reported.add(id);
      }
      for (const id of this.#reported) {
        if (reported.has(id)) continue;
        const [ns, name] = id.split('/') as [string, string];
        const observed = inventory.observed('HTTPRoute', ns, name);
        if (observed) status.routeParents(ns, name, [], observed);
      }
      this.#reported = reported;
    }
    this.#model = model;
    return true;
  }
}
