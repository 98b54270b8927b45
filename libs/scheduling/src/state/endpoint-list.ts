import type { IndexedEndpoint } from './endpoint';
import { EndpointColumns } from './endpoint-columns';

/**
 * An unordered list of endpoints with O(1) add, remove (swap with the last) and refresh, holding their hot
 * metrics column-wise alongside. Order carries no meaning: every ranking breaks ties by a total order, so results
 * do not depend on the history of changes.
 */
export class EndpointList {
  readonly id: string;
  readonly columns = new EndpointColumns();
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
    const pos = this.#items.length;
    e.listId = this.id;
    e.listPos = pos;
    this.#items.push(e);
    this.columns.ensure(pos + 1, pos);
    this.columns.write(pos, e);
    this.version++;
  }

  remove(e: IndexedEndpoint): void {
    if (e.listId !== this.id || this.#items[e.listPos] !== e) return;
    const items = this.#items;
    const lastPos = items.length - 1;
    const last = items.pop() as IndexedEndpoint;
    if (last !== e) {
      items[e.listPos] = last;
      last.listPos = e.listPos;
      this.columns.copyRow(e.listPos, this.columns, lastPos);
    }
    e.listId = '';
    e.listPos = -1;
    this.version++;
  }

  /** Rewrites the endpoint's row after its record changed (membership unchanged). */
  refresh(e: IndexedEndpoint): void {
    if (this.#items[e.listPos] === e) this.columns.write(e.listPos, e);
  }

  /** True when `e` is in this list. */
  holds(e: IndexedEndpoint): boolean {
    return e.listPos >= 0 && this.#items[e.listPos] === e;
  }
}
