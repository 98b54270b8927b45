import type { LegHandle } from './types';

/**
 * Concurrent tasks of one stage (the EPD encoder fan-out, one task per media item) that stand or fall together.
 * The first failure cancels the others: their legs in flight are aborted and no task starts another try (a task
 * asks `failure` before each). `all` settles only once every task has, so no leg and no rejection outlives it.
 */
export class FanOut {
  #failure: Error | undefined;
  readonly #legs = new Set<LegHandle<unknown>>();

  /** The failure that cancelled the group, if one did. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /**
   * Follows one leg of a task: aborted at once if the group already failed, or when it fails later. A leg stays in
   * the group once it settled (the group lives as long as its request): aborting a settled leg does nothing, so
   * no reaction per leg is needed to take it out.
   */
  track<T>(handle: LegHandle<T>): Promise<T> {
    if (this.#failure !== undefined) {
      handle.abort(this.#failure);
      return handle.promise;
    }
    this.#legs.add(handle);
    return handle.promise;
  }

  /** Cancels the group with `err` (the first failure wins). */
  fail(err: Error): void {
    if (this.#failure !== undefined) return;
    this.#failure = err;
    for (const leg of this.#legs) leg.abort(err);
    this.#legs.clear();
  }

  /**
   * Starts `count` tasks and waits for all of them; resolves with their results in order, or rejects with the
   * first failure once every task has settled. A task that throws while starting fails the group like any other.
   */
  async all<T>(count: number, start: (index: number) => Promise<T>): Promise<T[]> {
    const tasks: Promise<T>[] = [];
    for (let i = 0; i < count; i++) {
      let task: Promise<T>;
      try {
        task = start(i);
      } catch (err) {
        task = Promise.reject(err);
      }
      tasks.push(
        task.catch((err: unknown) => {
          this.fail(err instanceof Error ? err : new Error(String(err)));
          throw err;
        }),
      );
    }
    const settled = await Promise.allSettled(tasks);
    if (this.#failure !== undefined) throw this.#failure;
    return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
  }
}
