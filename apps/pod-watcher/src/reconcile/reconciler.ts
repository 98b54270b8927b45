import { inferencePoolServerName, objectKey, parseInferencePoolServerName } from '@triad/bus';
import type { ModelRoute, ModelServer } from '@triad/crd';
import type { Logger } from '@triad/runtime';
import { finishReconcileSpan, startReconcileSpan } from '@triad/telemetry';
import type { GatewayApiSync } from '../gateway-api/gateway-api-sync';
import { poolModelServer } from '../gateway-api/pool-server';
import type { EngineAuth } from '../engine-credentials/engine-auth';
import type { EngineCredentialSync } from '../engine-credentials/engine-credential-sync';
import type { Inventory, InventoryChange } from '../inventory/inventory';
import type { ProviderSync } from '../providers/provider-sync';
import type { StatePublisher } from '../publish/state-publisher';
import { bootstrapQueryUrl, endpointRecord, modelRouteRecord, modelServerRecord } from '../publish/records';
import type { EncoderRegistrySync } from '../registry/encoder-registry-sync';
import { baseUrl, planEncoderRegistries, type EngineState } from '../registry/registry-plan';
import type { Scraper, TargetView } from '../scrape/scraper';
import type { ShardRing } from '../shard/shard-ring';
import { EndpointTable, type PlacementDiff } from '../topology/endpoint-table';
import { targetId, type Placement } from '../topology/placement';

export interface ReconcilerOptions {
  readonly inventory: Inventory;
  readonly scraper: Scraper;
  readonly publisher: StatePublisher;
  readonly registry?: EncoderRegistrySync;
  /** Encoders per language-only server's registry: 0 = every eligible one (see registry-plan.ts). */
  readonly encodersPerPrefill?: number;
  /** Warnings about ignored port annotations. */
  readonly logger?: Logger;
  /** ExternalModelProviders, their credentials and status. */
  readonly providers: ProviderSync;
  /** ModelServers' engine credentials (`engineAuth.secretRef`), sealed, and their condition. */
  readonly engineCredentials?: EngineCredentialSync;
  /** The `Authorization` a ModelServer's engines expect, for the watcher's own reads of them (engine-auth.ts). */
  readonly engineAuth?: (namespace: string, server: string) => EngineAuth;
  /** Gateway API mode (`--gateway-api`): Gateways, HTTPRoutes, InferencePools. */
  readonly gatewayApi?: GatewayApiSync;
  readonly now?: () => number;
  /** Where the objects come from (`kube`, `file`), for the reconcile spans. */
  readonly source?: string;
  /** The scrape shards (several replicas): which endpoint records, and so which engines, are this replica's. */
  readonly shard?: ShardRing;
  /** Whether this replica holds the writer lease (it runs the SGLang encoder registries, which read every engine). */
  readonly isWriter?: () => boolean;
  /** This replica's identity, named in the records it writes (`scrapedBy`: its scrape freshness ages them). */
  readonly identity?: string;
}

/** What one pass did, for its span. */
interface PassCounts {
  written: number;
  deleted: number;
}

/**
 * Turns inventory changes and scrape results into the desired KV state. Changes are collected and applied once
 * per event-loop turn: a ModelServer change reclassifies its whole namespace, a pod change reclassifies that pod
 * against every ModelServer of its namespace (EndpointTable); scrape targets follow the placements, and the
 * publisher gets the new records. Whatever arrives in one turn (a relist, a file reload) is applied as one step.
 */
export class Reconciler {
  readonly table = new EndpointTable();
  readonly #opts: ReconcilerOptions;
  readonly #now: () => number;
  /** Namespaces whose ModelServers changed: reclassified as a whole. */
  readonly #dirtyNamespaces = new Set<string>();
  /** Pods changed in namespaces whose ModelServers did not: only those pods are reclassified. */
  readonly #dirtyPods = new Map<string, Set<string>>();
  readonly #dirtyServers = new Set<string>();
  readonly #dirtyRoutes = new Set<string>();
  /** Scrape target → keys of the placements using it. */
  readonly #byTarget = new Map<string, Set<string>>();
  /** Placement key → its scrape target. */
  readonly #targetOf = new Map<string, string>();
  /** What the registry plan last used of each target it looked at (encoder health, registry port, restarts). */
  readonly #registryInputs = new Map<string, string>();
  /** Registry owners' targets whose last scrape failed (a recovery means the server may have restarted). */
  readonly #ownerStale = new Map<string, boolean>();
  #registryDirty = false;
  /** Owner targets seen recovering since the last registry plan. */
  readonly #resyncOwners = new Set<string>();
  #scheduled = false;
  /** Kinds changed or rejected since the last pass (its span's trigger), and versions rejected since then. */
  readonly #changedKinds = new Set<string>();
  #rejected = 0;
  /** True until the source's first full state is applied (`flushInitial`): passes until then are `initial`. */
  #initial = true;

  constructor(options: ReconcilerOptions) {
    this.#opts = options;
    this.#now = options.now ?? Date.now;
  }

  /** Inventory listener. */
  onInventoryChange(c: InventoryChange): void {
    this.#changedKinds.add(c.kind);
    const { providers, gatewayApi, engineCredentials } = this.#opts;
    switch (c.kind) {
      case 'Pod': {
        let pods = this.#dirtyPods.get(c.namespace);
        if (!pods) this.#dirtyPods.set(c.namespace, (pods = new Set()));
        pods.add(c.name);
        break;
      }
      case 'ModelServer':
        this.#dirtyNamespaces.add(c.namespace);
        this.#dirtyServers.add(`${c.namespace}/${c.name}`);
        engineCredentials?.server(c.namespace, c.name);
        break;
      case 'ModelRoute':
        this.#dirtyRoutes.add(`${c.namespace}/${c.name}`);
        gatewayApi?.markDirty();
        break;
      case 'ExternalModelProvider':
        providers.provider(c.namespace, c.name);
        break;
      case 'Secret':
        providers.secret(c.namespace, c.name);
        engineCredentials?.secret(c.namespace, c.name);
        break;
      case 'InferencePool':
        if (!gatewayApi) break;
        // The pool is published as an aggregated ModelServer: its pods are classified with the namespace's.
        this.#dirtyNamespaces.add(c.namespace);
        this.#dirtyServers.add(`${c.namespace}/${inferencePoolServerName(c.name)}`);
        gatewayApi.markDirty();
        break;
      case 'Gateway':
      case 'HTTPRoute':
      case 'Namespace':
        gatewayApi?.markDirty();
        break;
    }
    this.#schedule();
  }

  /**
   * Inventory listener for a rejected (invalid) version: nothing to apply (the last valid version stays), but the
   * next pass reports it (an ExternalModelProvider's status is written from here).
   */
  onInventoryRejected(c: InventoryChange): void {
    this.#changedKinds.add(c.kind);
    this.#rejected++;
    if (c.kind === 'ExternalModelProvider' && c.name) this.#opts.providers.provider(c.namespace, c.name);
    this.#schedule();
  }

  /** The ModelServers of a namespace, InferencePools (Gateway API mode) included. */
  #serversOf(namespace: string): ModelServer[] {
    const pools = this.#opts.gatewayApi?.pools(namespace) ?? [];
    return [...this.#opts.inventory.modelServers(namespace), ...pools.map(poolModelServer)];
  }

  #routeRecord(mr: ModelRoute) {
    const providers = this.#opts.providers.resolve(mr);
    const gatewayApi = this.#opts.gatewayApi;
    return modelRouteRecord(mr, { ...(providers ? { providers } : {}), ...(gatewayApi ? { listeners: gatewayApi.listenersOf(mr) } : {}) });
  }

  /** Scraper listener: refresh the records of every placement on that address. */
  onScrapeUpdate(target: string): void {
    const keys = this.#byTarget.get(target);
    if (!keys) return;
    const view = this.#opts.scraper.view(target);
    const now = this.#now();
    for (const key of keys) {
      const p = this.table.get(key);
      if (!p) continue;
      this.#opts.publisher.endpoints.set(key, endpointRecord(p, view, now, this.#opts.identity));
      if (p.mode !== 'epd' || p.engine !== 'SGLang') continue;
      if (this.#registryInputs.has(target) && this.#registryInputs.get(target) !== registryInput(view)) this.#registryDirty = true;
      if (p.registryOwner) this.#watchOwner(target, view);
    }
    if (this.#registryDirty) this.#schedule();
  }

  /**
   * Whether this replica scrapes `target`: one of its endpoint records is in this replica's shard, or it is an
   * engine of a SGLang EPD ModelServer and this replica is the writer (its encoder-registry plan reads their
   * health and `/server_info` directly).
   */
  ownsTarget(target: string): boolean {
    const shard = this.#opts.shard;
    if (shard === undefined) return true;
    const keys = this.#byTarget.get(target);
    if (keys === undefined) return false;
    const writer = this.#opts.isWriter?.() ?? false;
    for (const key of keys) {
      if (shard.owns(key)) return true;
      if (writer) {
        const p = this.table.get(key);
        if (p?.mode === 'epd' && p.engine === 'SGLang') return true;
      }
    }
    return false;
  }

  /**
   * The `Authorization` for the watcher's reads of `target`'s API: that of a ModelServer placed on it (several may
   * select one pod and port, i.e. one engine with one key: the first that has a credential gives it), else why
   * there is none.
   */
  engineAuthFor(target: string): EngineAuth | undefined {
    const of = this.#opts.engineAuth;
    if (of === undefined) return undefined;
    let first: EngineAuth | undefined;
    for (const key of this.#byTarget.get(target) ?? []) {
      const p = this.table.get(key);
      if (p === undefined) continue;
      const auth = of(p.namespace, p.modelServer);
      if (auth.header !== undefined) return auth;
      first ??= auth;
    }
    return first;
  }

  /** The registry sync could not reach a registry: re-read its servers' `/server_info` (the port may have moved). */
  onRegistryUnreachable(prefills: readonly string[]): void {
    for (const key of prefills) {
      const p = this.table.get(key);
      if (p) this.#opts.scraper.refreshServerInfo(targetId(p));
    }
  }

  /** A registry owner that answers again after failing scrapes may have restarted and forgotten its registry. */
  #watchOwner(target: string, view: TargetView | undefined): void {
    const stale = view?.metrics.stale ?? false;
    const was = this.#ownerStale.get(target);
    this.#ownerStale.set(target, stale);
    if (was === true && !stale) this.#resyncOwners.add(target);
  }

  /**
   * Applies pending changes now (the scheduled turn does the same). A pass with inventory changes (or rejected
   * versions) is traced as a `reconcile` span, the root of its own trace: trigger (`initial` while the source's
   * first state is applied, else the kinds that changed, e.g. `ModelServer+Pod`), endpoints after the pass,
   * endpoint records written and deleted, versions rejected.
   */
  flush(): void {
    this.#scheduled = false;
    const inventoryDirty =
      this.#dirtyServers.size > 0 ||
      this.#dirtyRoutes.size > 0 ||
      this.#dirtyNamespaces.size > 0 ||
      this.#dirtyPods.size > 0 ||
      this.#opts.providers.pending ||
      (this.#opts.engineCredentials?.pending ?? false) ||
      (this.#opts.gatewayApi?.pending ?? false);
    if (!inventoryDirty && this.#rejected === 0) {
      if (this.#registryDirty) this.#updateRegistryPlan();
      return;
    }
    const trigger = this.#initial ? 'initial' : [...this.#changedKinds].sort().join('+');
    const namespaces = this.#touchedNamespaces();
    const invalidSpecs = this.#rejected;
    this.#changedKinds.clear();
    this.#rejected = 0;
    const span = startReconcileSpan({
      source: this.#opts.source ?? 'unknown',
      trigger,
      ...(namespaces.size === 1 ? { namespace: [...namespaces][0] } : {}),
    });
    const counts: PassCounts = { written: 0, deleted: 0 };
    try {
      this.#applyInventory(counts);
    } catch (err) {
      finishReconcileSpan(span, { endpoints: this.table.size, ...counts, invalidSpecs, error: err });
      throw err;
    }
    finishReconcileSpan(span, { endpoints: this.table.size, ...counts, invalidSpecs });
  }

  /** Applies the source's first full state; later passes are named after what changed. */
  flushInitial(): void {
    this.flush();
    this.#initial = false;
  }

  #applyInventory(counts: PassCounts): void {
    const { inventory, publisher, providers, gatewayApi } = this.#opts;
    // Providers and Gateway API first: route records carry their outcome (provider readiness, attachments).
    for (const ns of providers.flush()) for (const mr of inventory.modelRoutes(ns)) this.#dirtyRoutes.add(`${ns}/${mr.metadata.name}`);
    // Engine credentials before the ModelServer records, so a gateway that learns a server can find its credential.
    this.#opts.engineCredentials?.flush();
    if (gatewayApi?.flush())
      for (const mr of inventory.modelRoutes()) this.#dirtyRoutes.add(`${mr.metadata.namespace}/${mr.metadata.name}`);
    for (const id of this.#dirtyServers) {
      const [ns, name] = id.split('/') as [string, string];
      const pool = parseInferencePoolServerName(name);
      const found = pool === undefined ? inventory.modelServer(ns, name) : gatewayApi && inventory.get('InferencePool', ns, pool);
      if (!found) publisher.modelServers.remove(objectKey(ns, name));
      else if (found.kind === 'ModelServer') publisher.modelServers.set(objectKey(ns, name), modelServerRecord(found));
      else {
        const record = {
          ...modelServerRecord(poolModelServer(found)),
          origin: { kind: 'InferencePool' as const, name: found.metadata.name },
        };
        publisher.modelServers.set(objectKey(ns, name), record);
      }
    }
    for (const id of this.#dirtyRoutes) {
      const [ns, name] = id.split('/') as [string, string];
      const mr = inventory.modelRoute(ns, name);
      if (mr) publisher.modelRoutes.set(objectKey(ns, name), this.#routeRecord(mr));
      else publisher.modelRoutes.remove(objectKey(ns, name));
    }
    this.#dirtyServers.clear();
    this.#dirtyRoutes.clear();
    for (const ns of this.#dirtyNamespaces) this.#apply(this.table.recompute(ns, this.#serversOf(ns), inventory.pods(ns)), counts);
    for (const [ns, names] of this.#dirtyPods) {
      if (this.#dirtyNamespaces.has(ns)) continue;
      const pods = new Map([...names].map((name) => [name, inventory.pod(ns, name)] as const));
      this.#apply(this.table.recomputePods(ns, this.#serversOf(ns), pods), counts);
    }
    this.#dirtyNamespaces.clear();
    this.#dirtyPods.clear();
    if (this.#registryDirty) this.#updateRegistryPlan();
  }

  /** Namespaces the pending changes touch (a pass touching exactly one names it on its span). */
  #touchedNamespaces(): Set<string> {
    const out = new Set<string>([...this.#dirtyNamespaces, ...this.#dirtyPods.keys()]);
    for (const id of this.#dirtyServers) out.add(id.slice(0, id.indexOf('/')));
    for (const id of this.#dirtyRoutes) out.add(id.slice(0, id.indexOf('/')));
    return out;
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.flush());
  }

  /** Applies a classification diff: scrape targets follow the placements, the publisher gets the records. */
  #apply(diff: PlacementDiff, counts: PassCounts): void {
    const { scraper, publisher } = this.#opts;
    const now = this.#now();
    counts.written += diff.upserted.length;
    counts.deleted += diff.removed.length;
    // Whether this replica scrapes an address depends on the placements using it (ownsTarget): asked again for
    // each address a change touched.
    const touched = new Set<string>();
    for (const p of diff.removed) {
      const id = this.#targetOf.get(p.key);
      if (id !== undefined) touched.add(id);
      this.#unlink(p.key);
      publisher.endpoints.remove(p.key);
    }
    for (const p of diff.upserted) {
      const id = targetId(p);
      const old = this.#targetOf.get(p.key);
      if (old !== undefined) touched.add(old);
      touched.add(id);
      this.#link(p, id);
      publisher.endpoints.set(p.key, endpointRecord(p, scraper.view(id), now, this.#opts.identity));
      if (p.problems) this.#opts.logger?.warn({ endpoint: p.key, problems: p.problems }, 'ignored a pod annotation');
    }
    for (const id of touched) {
      scraper.reown(id);
      scraper.setBootstrapQuery(id, this.#bootstrapQueryOf(id));
    }
    if (diff.upserted.some((p) => p.mode === 'epd') || diff.removed.some((p) => p.mode === 'epd')) this.#registryDirty = true;
  }

  /**
   * The bootstrap server to ask for an address: that of a vLLM Mooncake prefill placed on it (several ModelServers
   * may select one pod; any of them that needs the probe gets it).
   */
  #bootstrapQueryOf(target: string): string | undefined {
    for (const key of this.#byTarget.get(target) ?? []) {
      const p = this.table.get(key);
      const url = p === undefined ? undefined : bootstrapQueryUrl(p);
      if (url !== undefined) return url;
    }
    return undefined;
  }

  /** Points a placement at its address; a placement whose address changed lets go of the old one. */
  #link(p: Placement, id: string): void {
    const old = this.#targetOf.get(p.key);
    if (old === id) return;
    if (old !== undefined) this.#unlink(p.key);
    this.#targetOf.set(p.key, id);
    let keys = this.#byTarget.get(id);
    if (!keys) this.#byTarget.set(id, (keys = new Set()));
    keys.add(p.key);
    this.#opts.scraper.acquire(id, baseUrl(p), p.engine);
  }

  #unlink(key: string): void {
    const id = this.#targetOf.get(key);
    if (id === undefined) return;
    this.#targetOf.delete(key);
    const keys = this.#byTarget.get(id);
    if (!keys?.delete(key)) return;
    if (keys.size === 0) {
      this.#byTarget.delete(id);
      this.#registryInputs.delete(id);
      this.#ownerStale.delete(id);
    }
    this.#opts.scraper.release(id);
  }

  #updateRegistryPlan(): void {
    this.#registryDirty = false;
    const { scraper, registry } = this.#opts;
    if (!registry) return;
    const stateOf = (p: Placement): EngineState | undefined => {
      const view = scraper.view(targetId(p));
      this.#registryInputs.set(targetId(p), registryInput(view));
      if (!view) return undefined;
      const { metrics, serverInfo } = view;
      const healthy = metrics.scrapedAt > 0 && !metrics.stale;
      return { healthy, load: metrics.running + metrics.waiting, ...(serverInfo ? { serverInfo } : {}) };
    };
    const options = { encodersPerPrefill: this.#opts.encodersPerPrefill ?? 0, previous: registry.planned() };
    const plan = planEncoderRegistries(this.table.all(), stateOf, options);
    registry.update(plan);
    if (this.#resyncOwners.size === 0) return;
    for (const p of this.table.all()) {
      if (!p.registryOwner || !this.#resyncOwners.has(targetId(p))) continue;
      for (const r of plan.values()) if (r.prefills.includes(p.key)) registry.resync(r.registryUrl);
    }
    this.#resyncOwners.clear();
  }
}

/** What the registry plan reads of a target: a change of it calls for a new plan (load alone does not). */
function registryInput(view: TargetView | undefined): string {
  if (!view) return 'unknown';
  const { metrics, serverInfo } = view;
  return JSON.stringify([metrics.scrapedAt > 0 && !metrics.stale, serverInfo?.encoderBootstrapPort, serverInfo?.languageOnly]);
}
