import { backoffDelay, retry } from './retry';

class Flaky extends Error {}
class Broken extends Error {}

describe('retry', () => {
  it('doubles the delay up to the cap, and jitter keeps it within [half, all] of the step', () => {
    const policy = { initialMs: 50, maxMs: 1000 };
    expect([0, 1, 2, 3, 4, 5, 6].map((a) => backoffDelay(policy, a))).toEqual([50, 100, 200, 400, 800, 1000, 1000]);
    for (let a = 0; a < 8; a++) {
      const d = backoffDelay({ ...policy, jitter: true }, a);
      const step = backoffDelay(policy, a);
      expect(d).toBeGreaterThanOrEqual(step / 2);
      expect(d).toBeLessThanOrEqual(step);
    }
  });

  it('retries retryable failures until the call succeeds, and throws any other failure at once', async () => {
    let tries = 0;
    const seen: number[] = [];
    const ok = await retry(
      async () => {
        tries++;
        if (tries < 3) throw new Flaky('not yet');
        return 'done';
      },
      { initialMs: 1, maxMs: 2, retryable: (e) => e instanceof Flaky, onRetry: (_e, attempt) => seen.push(attempt) },
    );
    expect(ok).toBe('done');
    expect(seen).toEqual([1, 2]);
    let calls = 0;
    const broken = new Broken('no');
    await expect(
      retry(
        () => {
          calls++;
          return Promise.reject(broken);
        },
        { initialMs: 1, maxMs: 2, retryable: (e) => e instanceof Flaky },
      ),
    ).rejects.toBe(broken);
    expect(calls).toBe(1);
  });

  it('throws the last failure once the next wait would pass the budget', async () => {
    let calls = 0;
    await expect(
      retry(
        () => {
          calls++;
          return Promise.reject(new Flaky(`try ${calls}`));
        },
        { initialMs: 20, maxMs: 20, budgetMs: 50 },
      ),
    ).rejects.toThrow(/try [23]/);
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(calls).toBeLessThanOrEqual(3);
  });
});
