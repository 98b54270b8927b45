import { FanOut } from './fan-out';
import type { LegHandle } from './types';

/** A leg stand-in that settles when told (or when aborted, with the abort reason). */
function pendingLeg<T>(): LegHandle<T> & { resolve(v: T): void; aborted: Error | undefined } {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const leg = {
    promise,
    aborted: undefined as Error | undefined,
    resolve: (v: T) => resolve(v),
    abort(reason: Error) {
      leg.aborted = reason;
      reject(reason);
    },
  };
  return leg;
}

describe('FanOut', () => {
  it('resolves with every result in order', async () => {
    const group = new FanOut();
    const legs = [pendingLeg<number>(), pendingLeg<number>()];
    const all = group.all(2, (i) => group.track(legs[i] as LegHandle<number>));
    legs[1]?.resolve(11);
    legs[0]?.resolve(10);
    await expect(all).resolves.toEqual([10, 11]);
  });

  it('aborts the siblings on the first failure and settles only after all of them', async () => {
    const group = new FanOut();
    const legs = [pendingLeg<number>(), pendingLeg<number>(), pendingLeg<number>()];
    const boom = new Error('item 1 failed');
    const all = group.all(3, async (i) => {
      if (i === 1) throw boom;
      return group.track(legs[i]);
    });
    await expect(all).rejects.toBe(boom);
    expect(legs[0]?.aborted).toBe(boom);
    expect(legs[2]?.aborted).toBe(boom);
    // A leg tracked after the failure is aborted at once.
    const late = pendingLeg<number>();
    await expect(group.track(late)).rejects.toBe(boom);
  });

  it('treats a task that throws while starting like a failed task, with the started ones aborted', async () => {
    const group = new FanOut();
    const first = pendingLeg<number>();
    const all = group.all(2, (i) => {
      if (i === 1) throw new Error('no encoder for item 1');
      return group.track(first);
    });
    await expect(all).rejects.toThrow('no encoder for item 1');
    expect(first.aborted?.message).toBe('no encoder for item 1');
  });
});
