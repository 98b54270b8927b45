import { resolveLatencyModel } from './latency';
import { PrefixCache } from './prefix-cache';
import { Rank } from './rank';

describe('Rank admission', () => {
  const model = resolveLatencyModel('realistic', { maxRunning: 2, kvCapacityTokens: 1000 });

  it('admits up to maxRunning, queues the rest in order and admits them on release', async () => {
    const rank = new Rank(0, model);
    expect(rank.tryAdmit(100)).toBe(true);
    expect(rank.tryAdmit(100)).toBe(true);
    expect(rank.tryAdmit(100)).toBe(false);
    const third = rank.enqueue(100);
    const fourth = rank.enqueue(100);
    expect(rank.waiting).toBe(2);
    rank.release(100);
    await expect(third.admitted).resolves.toBe(true);
    expect(rank.running).toBe(2);
    expect(rank.waiting).toBe(1);
    fourth.cancel();
    await expect(fourth.admitted).resolves.toBe(false);
    expect(rank.waiting).toBe(0);
  });

  it('holds back a request whose KV does not fit, but never blocks an empty engine', () => {
    const rank = new Rank(0, model);
    expect(rank.tryAdmit(5000)).toBe(true);
    expect(rank.kvUsage()).toBe(1);
    expect(rank.tryAdmit(1)).toBe(false);
    rank.release(5000);
    expect(rank.kvUsage()).toBe(0);
  });

  it('finds a repeated prompt prefix in its cache', () => {
    const cache = new PrefixCache(1000);
    const text = 'x'.repeat(64 * 4);
    expect(cache.lookupAndInsert(text, 64)).toBe(0);
    expect(cache.lookupAndInsert(text, 64)).toBe(63);
    expect(cache.lookupAndInsert(`${'x'.repeat(64 * 2)}${'y'.repeat(128)}`, 64)).toBe(32);
  });
});

describe('resolveLatencyModel', () => {
  it('runs without timers only when every cost is zero', () => {
    expect(resolveLatencyModel('zero').zero).toBe(true);
    expect(resolveLatencyModel('zero', { decodeMsPerToken: 20 })).toMatchObject({
      zero: false,
      decodeMsPerToken: 20,
      prefillMsPer1kTokens: 0,
    });
    expect(resolveLatencyModel('realistic').zero).toBe(false);
    expect(
      resolveLatencyModel('realistic', { encodeMsPerItem: 0, prefillMsPer1kTokens: 0, decodeMsPerToken: 0, kvTransferMsPer1kTokens: 0 })
        .zero,
    ).toBe(true);
  });
});
