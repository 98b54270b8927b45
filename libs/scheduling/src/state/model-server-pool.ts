import type { ModelServerRecord } from '@triad/bus';
import type { IndexedEndpoint } from './endpoint';
import { EndpointList } from './endpoint-list';

const NO_GROUP = '';

/** Where a profile run's candidates come from: one list (read in place) or several lists' endpoints. */
export type CandidateSource = EndpointList | readonly IndexedEndpoint[];

const NONE: readonly IndexedEndpoint[] = [];

/**
 * The ready endpoints of one ModelServer, kept in per-role (and per PD group) lists that change incrementally as
 * records come and go, so scheduling never scans or rebuilds the whole index.
 */
export class ModelServerPool {
  readonly namespace: string;
  readonly name: string;
  record: ModelServerRecord | undefined;
  readonly aggregated = new EndpointList('aggregated');
  readonly decode = new EndpointList('decode');
  readonly #prefill = new Map<string, EndpointList>();
  readonly #encode = new Map<string, EndpointList>();
  #encodeVersion = 0;
  readonly #encodeUnions = new Map<string, { version: number; items: readonly IndexedEndpoint[] }>();

  constructor(namespace: string, name: string) {
    this.namespace = namespace;
    this.name = name;
  }

  /** Ready prefill endpoints of a PD group (empty when none). */
  prefill(group: string | undefined): CandidateSource {
    return (group === undefined ? undefined : this.#prefill.get(group)) ?? NONE;
  }

  /**
   * Encoders that may serve a request decoded in `group`: those labelled with that group plus those with no group
   * label (which serve every group). Cached until an encoder joins or leaves.
   */
  encoders(group: string | undefined): CandidateSource {
    const g = group ?? NO_GROUP;
    const own = g === NO_GROUP ? undefined : this.#encode.get(g);
    const shared = this.#encode.get(NO_GROUP);
    if (!own || !shared) return own ?? shared ?? NONE;
    const cached = this.#encodeUnions.get(g);
    if (cached && cached.version === this.#encodeVersion) return cached.items;
    const items = [...own.items, ...shared.items];
    this.#encodeUnions.set(g, { version: this.#encodeVersion, items });
    return items;
  }

  /** Rewrites an endpoint's metrics row after a record update that kept its list. */
  refresh(e: IndexedEndpoint): void {
    if (e.listId === '') return;
    if (e.listId === this.aggregated.id) this.aggregated.refresh(e);
    else if (e.listId === this.decode.id) this.decode.refresh(e);
    else {
      const [kind, group] = splitListId(e.listId);
      (kind === 'prefill' ? this.#prefill : this.#encode).get(group)?.refresh(e);
    }
  }

  /** Number of endpoints in the pool's lists. */
  get size(): number {
    let n = this.aggregated.size + this.decode.size;
    for (const l of this.#prefill.values()) n += l.size;
    for (const l of this.#encode.values()) n += l.size;
    return n;
  }

  /** Puts a ready endpoint in the list of its role (and group); unready or ungrouped prefill pods go nowhere. */
  attach(e: IndexedEndpoint): void {
    const r = e.record;
    if (!r.ready) return;
    switch (r.role) {
      case 'aggregated':
        this.aggregated.add(e);
        return;
      case 'decode':
        this.decode.add(e);
        return;
      case 'prefill':
        if (r.group !== undefined) this.#groupList(this.#prefill, 'prefill', r.group).add(e);
        return;
      case 'encode':
        this.#groupList(this.#encode, 'encode', r.group ?? NO_GROUP).add(e);
        this.#encodeVersion++;
        return;
    }
  }

  /** Takes an endpoint out of whichever list holds it. */
  detach(e: IndexedEndpoint): void {
    if (e.listId === '') return;
    if (e.listId === this.aggregated.id) this.aggregated.remove(e);
    else if (e.listId === this.decode.id) this.decode.remove(e);
    else this.#detachGrouped(e);
  }

  #detachGrouped(e: IndexedEndpoint): void {
    const [kind, group] = splitListId(e.listId);
    const lists = kind === 'prefill' ? this.#prefill : this.#encode;
    const list = lists.get(group);
    if (!list) return;
    list.remove(e);
    if (list.size === 0) lists.delete(group);
    if (kind === 'encode') this.#encodeVersion++;
  }

  #groupList(lists: Map<string, EndpointList>, kind: string, group: string): EndpointList {
    let list = lists.get(group);
    if (!list) {
      list = new EndpointList(`${kind}:${group}`);
      lists.set(group, list);
    }
    return list;
  }
}

function splitListId(id: string): [string, string] {
  const colon = id.indexOf(':');
  return [id.slice(0, colon), id.slice(colon + 1)];
}
