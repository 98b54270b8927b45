import { hash as oneShotHash, randomBytes, scrypt, scryptSync, timingSafeEqual } from 'node:crypto';

/**
 * API keys look like `sk-<id>_<secret>`: `id` (12 lowercase base-36 characters) is not secret and is stored next
 * to the hash, so verifying a key runs scrypt against one entry instead of all of them. Keys without that shape
 * (imported from elsewhere) still work, at the cost of trying the entries that have no id.
 */
const KEY_SHAPE = /^sk-([a-z0-9]{12})_[A-Za-z0-9_-]{16,}$/;

export interface ScryptParams {
  readonly N: number;
  readonly r: number;
  readonly p: number;
}

/** OWASP's minimum for scrypt (N=2^15 would double the one-time cost per key without changing the design). */
const DEFAULT_SCRYPT: ScryptParams = { N: 16_384, r: 8, p: 1 };
const KEY_LEN = 32;

export interface ParsedHash extends ScryptParams {
  readonly salt: Buffer;
  readonly derived: Buffer;
}

/** A new random key and its id. Print it once; store only {@link hashApiKey}'s result. */
export function generateApiKey(): { key: string; id: string } {
  const id = Array.from(randomBytes(12), (b) => (b % 36).toString(36)).join('');
  return { key: `sk-${id}_${randomBytes(32).toString('base64url')}`, id };
}

/** The lookup id inside a key of the `sk-<id>_<secret>` shape, or undefined. */
export function apiKeyId(key: string): string | undefined {
  return KEY_SHAPE.exec(key)?.[1];
}

function maxmem(p: ScryptParams): number {
  return 256 * p.N * p.r * p.p;
}

/** `scrypt$N$r$p$<salt>$<hash>` (base64url), the form the key file stores. Synchronous: meant for tools. */
export function hashApiKey(key: string, params: ScryptParams = DEFAULT_SCRYPT): string {
  const salt = randomBytes(16);
  const derived = scryptSync(key, salt, KEY_LEN, { ...params, maxmem: maxmem(params) });
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString('base64url')}$${derived.toString('base64url')}`;
}

/** Parses a stored hash; undefined when it is not of the `scrypt$N$r$p$salt$hash` form. */
export function parseApiKeyHash(hash: string): ParsedHash | undefined {
  const parts = hash.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return undefined;
  const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![N, r, p].every((n) => Number.isInteger(n) && n > 0) || (N & (N - 1)) !== 0) return undefined;
  const salt = Buffer.from(parts[4], 'base64url');
  const derived = Buffer.from(parts[5], 'base64url');
  if (salt.length < 8 || derived.length < 16) return undefined;
  return { N, r, p, salt, derived };
}

/** Checks `key` against a parsed hash with scrypt (on the libuv pool) and a constant-time comparison. */
export function verifyApiKey(key: string, hash: ParsedHash): Promise<boolean> {
  return new Promise((resolve) => {
    scrypt(key, hash.salt, hash.derived.length, { N: hash.N, r: hash.r, p: hash.p, maxmem: maxmem(hash) }, (err, derived) => {
      resolve(!err && derived.length === hash.derived.length && timingSafeEqual(derived, hash.derived));
    });
  });
}

/** The in-memory cache key of a presented key: fast, and the raw key is never kept. */
export function fastKeyDigest(key: string): string {
  return oneShotHash('sha256', key, 'base64url');
}
