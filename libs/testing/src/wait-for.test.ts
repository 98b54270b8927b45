import { waitFor } from './wait-for';

describe('waitFor', () => {
  it('returns the first truthy value the check gives', async () => {
    let calls = 0;
    await expect(waitFor(() => (++calls >= 3 ? `after ${calls}` : undefined), { intervalMs: 1 })).resolves.toBe('after 3');
  });

  it('stops polling when its signal is aborted, without waiting for the interval or the deadline', async () => {
    const polling = new AbortController();
    let calls = 0;
    const waiting = waitFor(
      () => {
        calls++;
        return false;
      },
      { intervalMs: 60_000, timeoutMs: 120_000, signal: polling.signal },
    );
    polling.abort(new Error('the other side won'));
    await expect(waiting).rejects.toThrow('the other side won');
    expect(calls).toBe(1);
  });

  it('names what it waited for when the deadline passes', async () => {
    await expect(waitFor(() => false, { timeoutMs: 5, intervalMs: 1, what: 'the moon' })).rejects.toThrow(/waiting for the moon/);
  });
});
