import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { createAdmission, type Admission } from '../admission';
import { ANONYMOUS } from '../identity';
import { SILENT_LOGGER } from '../logger';
import { freshRecord } from './budget-record';
import { RedisStorePool, redisOptionsFor } from './redis-budget-store';
import { answeredOutcome } from '../../test/answered';

const ADDRESS = '127.0.0.1:6379';

describe('Redis budget store (Kthena rateLimit.global.redis)', () => {
  const prefix = `triad:test:${process.pid}:${randomBytes(4).toString('hex')}:`;
  const admissions: Admission[] = [];
  const admin = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true });
  afterAll(async () => {
    await Promise.all(admissions.map((a) => a.close()));
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(...keys);
    admin.disconnect();
  });

  it('parses Kthena host:port addresses and redis URLs', () => {
    expect(redisOptionsFor('redis.default.svc:6380')).toEqual({ host: 'redis.default.svc', port: 6380 });
    expect(redisOptionsFor('redis://:s3cret@10.0.0.1:6379/2')).toEqual({ host: '10.0.0.1', port: 6379, password: 's3cret', db: 2 });
  });

  it('writes with compare-and-set and shares one store per address', async () => {
    const pool = new RedisStorePool({ keyPrefix: prefix, timeoutMs: 2000, logger: SILENT_LOGGER });
    const store = pool.get(ADDRESS);
    expect(pool.get(ADDRESS)).toBe(store);
    expect(pool.size).toBe(1);
    expect(await store.write('k', freshRecord(1000, 1), 0)).toBe(true);
    expect(await store.write('k', freshRecord(1000, 1), 0)).toBe(false);
    const { record, revision } = await store.read('k');
    expect(record?.window).toBe(1);
    expect(await store.write('k', freshRecord(1000, 2), revision)).toBe(true);
    expect(await admin.pttl(`${prefix}k`)).toBeGreaterThan(0); // expires by itself: no sweep
    await pool.close();
  });

  it('two replicas using a route with global.redis admit exactly M of N', async () => {
    const started = Date.now();
    const now = (): number => Math.floor(started / 3_600_000) * 3_600_000 + 1_800_000 + (Date.now() - started);
    const [a, b] = (await Promise.all(
      ['ra', 'rb'].map(async (replicaId) => {
        const adm = await createAdmission(
          // Fail closed with a generous timeout: a slow store answer on a loaded machine must not admit by failing open.
          { rateLimit: { redisKeyPrefix: prefix, failMode: 'closed', storeTimeout: '10s' } },
          { registry: new Registry(), replicaId, now },
        );
        admissions.push(adm);
        return adm;
      }),
    )) as [Admission, Admission];
    const rateLimit = { inputTokensPerUnit: 150, unit: 'hour' as const, global: { redis: { address: ADDRESS } } };
    const results = [];
    for (let wave = 0; wave < 10; wave++) {
      results.push(
        ...(await Promise.all(
          [a, b, a, b].map((adm) =>
            adm.admit({
              identity: ANONYMOUS,
              model: 'redis-model',
              rateLimit,
              inputTokens: 10,
            }),
          ),
        )),
      );
    }
    expect(results.filter((r) => r.ok)).toHaveLength(15);
    expect(await admin.exists(`${prefix}model.redis-model`)).toBe(1);
  });

  it('fails open or closed when the Redis address cannot be reached', async () => {
    const rateLimit = { inputTokensPerUnit: 100, unit: 'minute' as const, global: { redis: { address: '127.0.0.1:1' } } };
    const ask = async (failMode: 'open' | 'closed') => {
      const adm = await createAdmission(
        { rateLimit: { failMode, storeTimeout: '200ms', redisKeyPrefix: prefix } },
        { registry: new Registry() },
      );
      admissions.push(adm);
      return adm.admit({ identity: ANONYMOUS, model: 'unreachable', rateLimit, inputTokens: 1 });
    };
    expect((await ask('open')).ok).toBe(true);
    expect(answeredOutcome(await ask('closed'))).toMatchObject({ ok: false, rejection: { status: 503, reason: 'store_unavailable' } });
  });
});
