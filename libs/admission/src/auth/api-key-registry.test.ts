import { apiKeyId, generateApiKey, hashApiKey, parseApiKeyHash } from './api-key-hash';
import { ApiKeyFileSchema } from './api-key-file';
import { ApiKeyRegistry } from './api-key-registry';

const FAST = { N: 1024, r: 8, p: 1 };

describe('API key hashing and the verified-key cache', () => {
  it('generates sk-<id>_<secret> keys and scrypt hashes that parse', () => {
    const { key, id } = generateApiKey();
    expect(key).toMatch(/^sk-[a-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
    expect(apiKeyId(key)).toBe(id);
    expect(apiKeyId('sk-imported-legacy-key')).toBeUndefined();
    const parsed = parseApiKeyHash(hashApiKey(key, FAST));
    expect(parsed).toMatchObject({ N: 1024, r: 8, p: 1 });
    expect(parseApiKeyHash('scrypt$1000$8$1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA')).toBeUndefined(); // N not a power of 2
    expect(parseApiKeyHash('sha256$abc')).toBeUndefined();
  });

  it('runs scrypt once per distinct key and answers from the cache afterwards', async () => {
    const a = generateApiKey();
    const legacy = 'sk-imported-legacy-key-0123456789';
    const registry = new ApiKeyRegistry(100, () => 'tier');
    registry.replace([
      { name: 'a', id: a.id, hash: hashApiKey(a.key, FAST), labels: { tier: 'pro' }, disabled: false },
      { name: 'legacy', hash: hashApiKey(legacy, FAST), labels: {}, disabled: false },
      { name: 'off', hash: hashApiKey('sk-disabled-key-000000', FAST), labels: {}, disabled: true },
    ]);
    expect(registry.cached(a.key)).toBeUndefined();
    const [first, second] = await Promise.all([registry.verify(a.key), registry.verify(a.key)]);
    expect(first).toMatchObject({ ok: true, identity: { id: 'key:a', tier: 'pro', user: 'a' } });
    expect(second).toEqual(first);
    expect(registry.cached(a.key)).toMatchObject({ ok: true });
    expect(await registry.verify(legacy)).toMatchObject({ ok: true, identity: { id: 'key:legacy' } });
    expect(await registry.verify('sk-disabled-key-000000')).toEqual({ ok: false });
    expect(registry.cached('sk-disabled-key-000000')).toEqual({ ok: false });
    registry.replace([]);
    expect(registry.cached(a.key)).toBeUndefined();
    expect(await registry.verify(a.key)).toEqual({ ok: false });
  });

  it('rejects key files with duplicate names or ids and malformed hashes, with paths', () => {
    const parsed = ApiKeyFileSchema.safeParse({
      keys: [
        { name: 'x', id: 'aaaaaaaaaaaa', hash: hashApiKey('k', FAST) },
        { name: 'x', id: 'aaaaaaaaaaaa', hash: 'plain' },
      ],
    });
    expect(parsed.success).toBe(false);
    const paths = parsed.error?.issues.map((i) => i.path.join('.'));
    expect(paths).toEqual(expect.arrayContaining(['keys.1.hash']));
    const dup = ApiKeyFileSchema.safeParse({
      keys: [
        { name: 'x', id: 'aaaaaaaaaaaa', hash: hashApiKey('k', FAST) },
        { name: 'x', id: 'aaaaaaaaaaaa', hash: hashApiKey('l', FAST) },
      ],
    });
    expect(dup.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual([
      "keys.1.name: duplicate key name 'x'",
      "keys.1.id: duplicate key id 'aaaaaaaaaaaa'",
    ]);
  });
});
