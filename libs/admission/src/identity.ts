/** Who a request is from, as established by {@link Authenticator}. Holds no secret. */
export interface Identity {
  readonly kind: 'api_key' | 'jwt' | 'anonymous';
  /** Stable id used for per-identity limits and logs: `key:<name>`, `jwt:<subject>` or `anonymous`. */
  readonly id: string;
  /** The user the fairness queue charges: the JWT subject, or the key's tenant (its name when it has none). */
  readonly user: string | undefined;
  readonly tenant?: string;
  /** Key name or JWT subject, for access logs. */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Rate-limit tier from the key's tier label or the JWT tier claim. */
  readonly tier?: string;
  /** Model patterns this identity may use (`*` wildcards); undefined means every model. */
  readonly models?: ModelMatcher;
}

export const ANONYMOUS: Identity = { kind: 'anonymous', id: 'anonymous', user: undefined, name: 'anonymous', labels: {} };

/** A compiled list of model name patterns where `*` matches any run of characters. */
export interface ModelMatcher {
  readonly patterns: readonly string[];
  allows(model: string): boolean;
}

/** Compiles patterns once (regex per wildcard pattern, a set for exact names) so checks are cheap per request. */
export function compileModelMatcher(patterns: readonly string[]): ModelMatcher {
  const exact = new Set<string>();
  const wild: RegExp[] = [];
  for (const p of patterns) {
    if (p === '*') return { patterns, allows: () => true };
    if (p.includes('*')) wild.push(new RegExp(`^${p.split('*').map(escapeRegex).join('.*')}$`));
    else exact.add(p);
  }
  return { patterns, allows: (model) => exact.has(model) || wild.some((re) => re.test(model)) };
}

/** True when `pattern` (with `*` wildcards) matches `name` — for one-off matches such as tokenizer config. */
export function matchesPattern(pattern: string, name: string): boolean {
  return compileModelMatcher([pattern]).allows(name);
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** True when `identity` may use `model`. */
export function mayUseModel(identity: Identity, model: string): boolean {
  return identity.models === undefined || identity.models.allows(model);
}
