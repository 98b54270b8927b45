import { legWriteDone, legWritePending } from '@triad/connectors';
import { TurnFlusher } from '../src/nats/turn-flusher';

/** Records the order of flushes against other end-of-turn callbacks. */
function recorder(): { order: string[]; flusher: TurnFlusher } {
  const order: string[] = [];
  const flusher = new TurnFlusher();
  flusher.add({ flushTurn: () => order.push('flush') });
  return { order, flusher };
}

/** Resolves after the check phase after the next one (every immediate queued now, and those they queue, have run). */
function twoCheckPhases(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(() => setImmediate(resolve))));
}

describe('TurnFlusher', () => {
  it('flushes a scheduling batch in this turn, before an end-of-turn callback queued after it', async () => {
    const { order, flusher } = recorder();
    flusher.request();
    setImmediate(() => order.push('leg write'));
    await twoCheckPhases();
    expect(order).toEqual(['flush', 'leg write']);
  });

  it('flushes what only informs others after the end-of-turn callbacks queued later in the same turn (a leg write)', async () => {
    const { order, flusher } = recorder();
    flusher.requestAfterWrites();
    // A leg dispatched after the event: undici writes it from an immediate queued then.
    legWritePending();
    setImmediate(() => {
      legWriteDone();
      order.push('leg write');
    });
    await twoCheckPhases();
    expect(order).toEqual(['leg write', 'flush']);
  });

  it('flushes once when a scheduling batch is asked for after a deferred flush in the same turn', async () => {
    const { order, flusher } = recorder();
    flusher.requestAfterWrites();
    flusher.requestAfterWrites();
    flusher.request();
    await twoCheckPhases();
    await twoCheckPhases();
    expect(order).toEqual(['flush']);
  });
});
