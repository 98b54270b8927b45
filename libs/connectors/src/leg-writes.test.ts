import { afterLegWrites, legWriteDone, legWritePending } from './leg-writes';

/** Resolves once every immediate queued now, and those they queue, have run. */
function twoCheckPhases(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(() => setImmediate(resolve))));
}

describe('afterLegWrites', () => {
  it('runs at once when no leg waits for its write', () => {
    const order: string[] = [];
    afterLegWrites(() => order.push('flush'));
    expect(order).toEqual(['flush']);
  });

  it('waits for the legs dispatched so far and runs right after the last one is written', async () => {
    const order: string[] = [];
    legWritePending();
    legWritePending();
    afterLegWrites(() => order.push('flush'));
    // undici's write callbacks, queued after the work asked to wait
    setImmediate(() => {
      legWriteDone();
      order.push('leg 1 written');
    });
    setImmediate(() => {
      legWriteDone();
      order.push('leg 2 written');
    });
    await twoCheckPhases();
    expect(order).toEqual(['leg 1 written', 'leg 2 written', 'flush']);
  });

  it('runs two check phases later at the latest when a leg is not written in them (a new connection)', async () => {
    const order: string[] = [];
    legWritePending();
    afterLegWrites(() => order.push('flush'));
    await twoCheckPhases();
    expect(order).toEqual(['flush']);
    legWriteDone();
    afterLegWrites(() => order.push('again'));
    expect(order).toEqual(['flush', 'again']);
  });
});
