import type { IndexedEndpoint } from './endpoint';

/**
 * An unordered list of endpoints with O(1) add and remove (swap with the last). Order carries no meaning: every
 * ranking breaks ties by a total order, so results do not depend on the history of changes.
 */
export class EndpointList {
  readonly id: string;
  readonly #items: IndexedEndpoint[] = [];
  /** Bumped on every membership change, so derived lists know when to rebuild. */
  version = 0;

  constructor(id: string) {
    this.id = id;
  }

  get items(): readonly IndexedEndpoint[] {
    return this.#items;
  }

  get size(): number {
    return this.#items.length;
  }

  add(e: IndexedEndpoint): void {
    e.listId = this.id;
    e.listPos = this.#items.length;
    this.#items.push(e);
    this.version++;
  }

  remove(e: IndexedEndpoint): void {
    if (e.listId !== this.id) return;
    const items = this.#items;
    const last = items.pop() as IndexedEndpoint;
    if (last !== e) {
      items[e.listPos] = last;
      last.listPos = e.listPos;
    }
    e.listId = '';
    e.listPos = -1;
    this.version++;
  }
}
