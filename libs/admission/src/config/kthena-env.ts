/**
 * Kthena's fairness environment variables and the fairness config key each one sets. Kthena reads only the
 * environment; Triad takes these as defaults under the config file (a key set in the file wins).
 * `FAIRNESS_PRIORITY_REFRESH_RETRIES` and `FAIRNESS_REBUILD_THRESHOLD` have no counterpart: Triad computes each
 * user's priority at dequeue time, so there is no stale heap to refresh or rebuild.
 */
const NUMERIC_ENV: ReadonlyArray<readonly [string, string]> = [
  ['FAIRNESS_INPUT_TOKEN_WEIGHT', 'inputTokenWeight'],
  ['FAIRNESS_OUTPUT_TOKEN_WEIGHT', 'outputTokenWeight'],
  ['FAIRNESS_PRIORITY_TOKEN_WEIGHT', 'priorityTokenWeight'],
  ['FAIRNESS_PRIORITY_REQUEST_NUM_WEIGHT', 'priorityRequestNumWeight'],
  ['FAIRNESS_MAX_CONCURRENT', 'maxConcurrent'],
  ['FAIRNESS_MAX_QPS', 'maxQps'],
];
const DURATION_ENV: ReadonlyArray<readonly [string, string]> = [
  ['FAIRNESS_WINDOW_SIZE', 'windowSize'],
  ['FAIRNESS_QUEUE_TIMEOUT', 'queueTimeout'],
];

/**
 * Reads Kthena's fairness env vars into a partial `fairness` config section. Values that do not parse are
 * returned as-is so the schema reports them with the variable's config path instead of silently dropping them.
 */
function fairnessFromKthenaEnv(env: Readonly<Record<string, string | undefined>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const enabled = env['ENABLE_FAIRNESS_SCHEDULING'];
  if (enabled !== undefined && enabled !== '') out['enabled'] = enabled.toLowerCase() === 'true' || enabled === '1';
  for (const [name, key] of NUMERIC_ENV) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    const n = Number(v);
    out[key] = Number.isFinite(n) ? n : v;
  }
  for (const [name, key] of DURATION_ENV) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    // Go durations ("5m") and plain seconds ("300", as some Helm values give) are both accepted.
    out[key] = /^\d+(\.\d+)?$/.test(v) ? Number(v) * 1000 : v;
  }
  return out;
}

/** Puts env-derived fairness settings under the ones the config document sets itself. */
export function withKthenaEnv(config: unknown, env: Readonly<Record<string, string | undefined>> | undefined): unknown {
  if (!env) return config;
  const fromEnv = fairnessFromKthenaEnv(env);
  if (Object.keys(fromEnv).length === 0) return config;
  const doc = (config && typeof config === 'object' ? config : {}) as Record<string, unknown>;
  const own = (doc['fairness'] && typeof doc['fairness'] === 'object' ? doc['fairness'] : {}) as Record<string, unknown>;
  return { ...doc, fairness: { ...fromEnv, ...own } };
}
