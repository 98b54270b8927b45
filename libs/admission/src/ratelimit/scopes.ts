import { RATE_LIMIT_UNIT_SECONDS, type RateLimit } from '@triad/crd';
import type { RateLimitConfig, TokenLimit } from '../config/admission-config';
import type { Identity } from '../identity';
import type { ScopeSettings } from './lease-account';
import type { BudgetStore } from './budget-store';

/** One limit a request is counted against: the model's (from its ModelRoute) or the identity's (from config). */
export interface Scope {
  readonly kind: 'model' | 'identity';
  /** Store key, e.g. `model.llama-3` or `id.key=3Ateam-a.llama-3`. */
  readonly key: string;
  /** How the scope is named in a 429 message. */
  readonly label: string;
  readonly store: BudgetStore;
  readonly settings: ScopeSettings;
}

/** Which store serves a scope: the default one, or the Redis store of a route's `global.redis.address`. */
export interface StoreResolver {
  readonly defaultStore: BudgetStore;
  redis(address: string): BudgetStore;
}

/**
 * Encodes a name as one KV key token: letters, digits, `-` and `_` stay, every other byte becomes `=XX`
 * (NATS keys allow `=`; dots would split tokens, and model names carry `/`, `:` and `.`).
 */
function keyToken(name: string): string {
  const hit = tokenCache.get(name);
  if (hit !== undefined) return hit;
  if (tokenCache.size >= 10_000) tokenCache.clear();
  const token = encodeToken(name);
  tokenCache.set(name, token);
  return token;
}

const tokenCache = new Map<string, string>();

function encodeToken(name: string): string {
  let out = '';
  for (const byte of Buffer.from(name, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9_-]/.test(c) ? c : `=${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out || '=';
}

type LimitShape = {
  inputTokensPerUnit?: number | undefined;
  outputTokensPerUnit?: number | undefined;
  unit: keyof typeof RATE_LIMIT_UNIT_SECONDS;
};

// Route and config limit objects are immutable once parsed, so their settings are computed once per object.
const settingsCache = new WeakMap<LimitShape, { maxDebtUnits: number; settings: ScopeSettings | undefined }>();

function settingsOf(limit: LimitShape, maxDebtUnits: number): ScopeSettings | undefined {
  const hit = settingsCache.get(limit);
  if (hit && hit.maxDebtUnits === maxDebtUnits) return hit.settings;
  const settings = computeSettings(limit, maxDebtUnits);
  settingsCache.set(limit, { maxDebtUnits, settings });
  return settings;
}

function computeSettings(limit: LimitShape, maxDebtUnits: number): ScopeSettings | undefined {
  const inLimit = limit.inputTokensPerUnit;
  const outLimit = limit.outputTokensPerUnit;
  if (inLimit === undefined && outLimit === undefined) return undefined;
  return {
    unitMs: RATE_LIMIT_UNIT_SECONDS[limit.unit] * 1000,
    limits: { ...(inLimit !== undefined ? { in: inLimit } : {}), ...(outLimit !== undefined ? { out: outLimit } : {}) },
    maxDebt: { in: Math.floor((inLimit ?? 0) * maxDebtUnits), out: Math.floor((outLimit ?? 0) * maxDebtUnits) },
  };
}

/**
 * The identity's limit: an entry for its id (`key:<name>`, `jwt:<sub>`, `anonymous`), else for its tenant
 * (`tenant:<name>`), else its tier (key label / JWT claim), else `defaultTier`. An entry is explicit limits or
 * `{tier}`. Unknown tier names (a label naming a tier the config lacks) fall through to `defaultTier`.
 */
function identityLimit(identity: Identity, config: RateLimitConfig): { limit: TokenLimit; via: string } | undefined {
  const entry =
    config.identities[identity.id] ?? (identity.tenant !== undefined ? config.identities[`tenant:${identity.tenant}`] : undefined);
  if (entry && !('tier' in entry)) return { limit: entry, via: identity.id };
  const tierName =
    entry && 'tier' in entry
      ? entry.tier
      : identity.tier !== undefined && identity.tier in config.tiers
        ? identity.tier
        : config.defaultTier;
  if (tierName === undefined) return undefined;
  const tier = config.tiers[tierName];
  return tier ? { limit: tier, via: `tier ${tierName}` } : undefined;
}

/** Every scope a request to `model` by `identity` is counted against, model scope first. */
export function resolveScopes(
  model: string,
  routeLimit: RateLimit | undefined,
  identity: Identity,
  config: RateLimitConfig,
  stores: StoreResolver,
): Scope[] {
  const scopes: Scope[] = [];
  const modelSettings = routeLimit ? settingsOf(routeLimit, config.maxDebtUnits) : undefined;
  if (modelSettings && routeLimit) {
    const address = routeLimit.global?.redis.address;
    scopes.push({
      kind: 'model',
      key: `model.${keyToken(model)}`,
      label: `model '${model}'`,
      settings: modelSettings,
      store: address !== undefined ? stores.redis(address) : stores.defaultStore,
    });
  }
  const own = identityLimit(identity, config);
  const ownSettings = own ? settingsOf(own.limit, config.maxDebtUnits) : undefined;
  if (own && ownSettings) {
    scopes.push({
      kind: 'identity',
      key: `id.${keyToken(identity.id)}${config.perModel ? `.${keyToken(model)}` : ''}`,
      label: `${identity.id} (${own.via})${config.perModel ? ` on model '${model}'` : ''}`,
      settings: ownSettings,
      store: stores.defaultStore,
    });
  }
  return scopes;
}
