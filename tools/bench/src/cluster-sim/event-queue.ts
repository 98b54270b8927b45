/** A binary min-heap of timed events; ties run in insertion order, so a run is deterministic. */
export class EventQueue<T> {
  #times: number[] = [];
  #seqs: number[] = [];
  #items: T[] = [];
  #seq = 0;

  get size(): number {
    return this.#items.length;
  }

  push(time: number, item: T): void {
    const t = this.#times,
      s = this.#seqs,
      it = this.#items;
    let i = it.length;
    t.push(time);
    s.push(this.#seq++);
    it.push(item);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#less(i, p)) break;
      this.#swap(i, p);
      i = p;
    }
  }

  /** Time of the next event (Infinity when empty). */
  peekTime(): number {
    return this.#items.length === 0 ? Infinity : this.#times[0];
  }

  pop(): { time: number; item: T } | undefined {
    const n = this.#items.length;
    if (n === 0) return undefined;
    const time = this.#times[0];
    const item = this.#items[0];
    this.#swap(0, n - 1);
    this.#times.pop();
    this.#seqs.pop();
    this.#items.pop();
    let i = 0;
    const m = n - 1;
    for (;;) {
      const l = 2 * i + 1,
        r = l + 1;
      let best = i;
      if (l < m && this.#less(l, best)) best = l;
      if (r < m && this.#less(r, best)) best = r;
      if (best === i) break;
      this.#swap(i, best);
      i = best;
    }
    return { time, item };
  }

  #less(a: number, b: number): boolean {
    const ta = this.#times[a],
      tb = this.#times[b];
    return ta < tb || (ta === tb && this.#seqs[a] < this.#seqs[b]);
  }

  #swap(a: number, b: number): void {
    const t = this.#times,
      s = this.#seqs,
      it = this.#items;
    [t[a], t[b]] = [t[b], t[a]];
    [s[a], s[b]] = [s[b], s[a]];
    [it[a], it[b]] = [it[b], it[a]];
  }
}
