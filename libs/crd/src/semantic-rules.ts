import { parseGoDuration } from './duration';
import { compileStringMatch } from './string-match';
import { overlappingRoleLabels } from './roles';
import type { ValidationProblem } from './problems';

// Semantic rules run on the raw object next to the shape check, so one pass reports every problem.
// They read defensively: a field of the wrong shape is the shape check's to report, not theirs.

type Raw = Record<string, unknown> | undefined;
const obj = (v: unknown): Raw => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
const nonEmptyMap = (v: unknown): boolean => !!obj(v) && Object.keys(obj(v) as object).length > 0;

const MODE_ALIASES: Record<string, string> = {
  aggregated: 'aggregated',
  pd: 'pd',
  epd: 'epd',
  'pd-disaggregated': 'pd',
  'vllm-epd': 'epd',
  'sglang-epd': 'epd',
};

/** Rules of a ModelServer spec that a JSON shape cannot express. */
export function modelServerRules(spec: unknown): ValidationProblem[] {
  const s = obj(spec);
  if (!s) return [];
  const problems: ValidationProblem[] = [];
  const ws = obj(s['workloadSelector']);
  const pd = obj(ws?.['pdGroup']);
  const rawMode = typeof s['pipelineMode'] === 'string' ? s['pipelineMode'] : undefined;
  const mode = rawMode ? MODE_ALIASES[rawMode] : pd ? 'pd' : 'aggregated';
  const pdPath = 'spec.workloadSelector.pdGroup';

  if (ws && !nonEmptyMap(ws['matchLabels'])) {
    problems.push({ path: 'spec.workloadSelector.matchLabels', message: 'must have at least one label' });
  }
  if (rawMode === 'vllm-epd' && s['inferenceEngine'] !== 'vLLM') {
    problems.push({ path: 'spec.pipelineMode', message: `'vllm-epd' needs inferenceEngine vLLM, got ${String(s['inferenceEngine'])}` });
  }
  if (rawMode === 'sglang-epd' && s['inferenceEngine'] !== 'SGLang') {
    problems.push({ path: 'spec.pipelineMode', message: `'sglang-epd' needs inferenceEngine SGLang, got ${String(s['inferenceEngine'])}` });
  }
  if (mode === 'aggregated' && pd) {
    problems.push({ path: pdPath, message: 'must not be set when pipelineMode is aggregated' });
  }
  if ((mode === 'pd' || mode === 'epd') && !pd) {
    problems.push({ path: pdPath, message: `required when pipelineMode is ${mode}` });
  }
  if (pd && mode === 'pd') {
    for (const key of ['prefillLabels', 'decodeLabels']) {
      if (!nonEmptyMap(pd[key])) problems.push({ path: `${pdPath}.${key}`, message: 'required when pipelineMode is pd' });
    }
    if (pd['encodeLabels'] !== undefined) {
      problems.push({ path: `${pdPath}.encodeLabels`, message: 'only used when pipelineMode is epd; set pipelineMode: epd or remove it' });
    }
  }
  // In epd mode, prefillLabels `{}` (what the CRD's required field allows) or no prefillLabels at all means E→PD:
  // the decode pods prefill themselves.
  if (pd && mode === 'epd') {
    for (const key of ['encodeLabels', 'decodeLabels']) {
      if (!nonEmptyMap(pd[key])) problems.push({ path: `${pdPath}.${key}`, message: 'required when pipelineMode is epd' });
    }
  }
  const auth = obj(s['engineAuth']);
  if (auth && auth['passThrough'] === true && auth['credential'] !== undefined) {
    problems.push({
      path: 'spec.engineAuth',
      message: "passThrough and credential both set Authorization: choose one (the client's, or the named credential)",
    });
  }
  if (auth && auth['secretRef'] !== undefined && auth['passThrough'] === true) {
    problems.push({
      path: 'spec.engineAuth',
      message: "passThrough and secretRef both set Authorization: choose one (the client's, or the Secret's)",
    });
  }
  if (auth && auth['secretRef'] !== undefined && auth['credential'] !== undefined) {
    problems.push({
      path: 'spec.engineAuth',
      message: "credential and secretRef both set Authorization: choose one (the gateway's file, or the namespace's Secret)",
    });
  }
  if (s['ecConnector'] !== undefined) {
    if (s['inferenceEngine'] !== 'vLLM') {
      problems.push({ path: 'spec.ecConnector', message: `is a vLLM EPD setting; inferenceEngine is ${String(s['inferenceEngine'])}` });
    } else if (mode !== 'epd') {
      problems.push({ path: 'spec.ecConnector', message: 'only used when pipelineMode is epd; set pipelineMode: epd or remove it' });
    }
  }
  const kv = obj(s['kvConnector']);
  if (kv) {
    const type = kv['type'] ?? 'http';
    if (kv['implementation'] !== undefined && type !== 'mooncake') {
      problems.push({ path: 'spec.kvConnector.implementation', message: `only used with type mooncake; type is ${String(type)}` });
    }
    if (kv['transferMode'] !== undefined && type !== 'nixl') {
      problems.push({ path: 'spec.kvConnector.transferMode', message: `only used with type nixl; type is ${String(type)}` });
    }
    if ((kv['implementation'] !== undefined || kv['transferMode'] !== undefined) && s['inferenceEngine'] !== 'vLLM') {
      problems.push({
        path: 'spec.kvConnector',
        message: `implementation and transferMode are vLLM settings; inferenceEngine is ${String(s['inferenceEngine'])}`,
      });
    }
  }
  if (pd && pd['groupKey'] === '') problems.push({ path: `${pdPath}.groupKey`, message: 'must not be empty' });
  const attempts = obj(obj(s['trafficPolicy'])?.['retry'])?.['attempts'];
  if (typeof attempts === 'number' && attempts < 0)
    problems.push({ path: 'spec.trafficPolicy.retry.attempts', message: 'must not be negative' });
  if (pd && (mode === 'pd' || mode === 'epd')) {
    const roles = mode === 'epd' ? (['encode', 'prefill', 'decode'] as const) : (['prefill', 'decode'] as const);
    for (const [a, b] of overlappingRoleLabels(pd as never, roles)) {
      problems.push({
        path: pdPath,
        message: `ambiguous roles: a pod can match both ${a} and ${b}; give them a label key with different values`,
      });
    }
  }
  return problems;
}

function stringMatchRules(match: unknown, path: string): ValidationProblem[] {
  const m = obj(match);
  if (!m) return [];
  const set = ['exact', 'prefix', 'regex'].filter((k) => m[k] !== undefined);
  const problems: ValidationProblem[] = [];
  if (set.length > 1) problems.push({ path, message: `only one of exact, prefix or regex may be set (got ${set.join(', ')})` });
  if (typeof m['regex'] === 'string') {
    const compiled = compileStringMatch({ regex: m['regex'] });
    if (typeof compiled === 'string') problems.push({ path: `${path}.regex`, message: compiled });
  }
  return problems;
}

/** Rules of a ModelRoute spec that a JSON shape cannot express (Kthena's CEL and webhook rules). */
export function modelRouteRules(spec: unknown): ValidationProblem[] {
  const s = obj(spec);
  if (!s) return [];
  const problems: ValidationProblem[] = [];
  const lora = Array.isArray(s['loraAdapters']) ? (s['loraAdapters'] as unknown[]) : [];
  if (!(typeof s['modelName'] === 'string' && s['modelName'] !== '') && lora.length === 0) {
    problems.push({ path: 'spec', message: 'modelName or loraAdapters is required' });
  }
  lora.forEach((name, i) => {
    if (name === '') problems.push({ path: `spec.loraAdapters[${i}]`, message: 'must not be empty' });
  });
  const rules = Array.isArray(s['rules']) ? (s['rules'] as unknown[]) : [];
  rules.forEach((rule, i) => {
    const r = obj(rule);
    const base = `spec.rules[${i}]`;
    const mm = obj(r?.['modelMatch']);
    const headers = obj(mm?.['headers']);
    for (const [name, match] of Object.entries(headers ?? {})) {
      problems.push(...stringMatchRules(match, `${base}.modelMatch.headers[${JSON.stringify(name)}]`));
    }
    problems.push(...stringMatchRules(mm?.['uri'], `${base}.modelMatch.uri`));
    const targets = Array.isArray(r?.['targetModels']) ? (r?.['targetModels'] as unknown[]) : [];
    let weightSum = 0;
    targets.forEach((target, j) => {
      const t = obj(target);
      const hasServer = typeof t?.['modelServerName'] === 'string' && t['modelServerName'] !== '';
      const hasProvider = typeof t?.['externalModelProviderName'] === 'string' && t['externalModelProviderName'] !== '';
      if (hasServer === hasProvider) {
        problems.push({
          path: `${base}.targetModels[${j}]`,
          message: 'exactly one of modelServerName or externalModelProviderName is required',
        });
      }
      if (hasProvider && lora.length > 0) {
        problems.push({ path: `${base}.targetModels[${j}]`, message: 'LoRA routes may not target an ExternalModelProvider' });
      }
      weightSum += typeof t?.['weight'] === 'number' ? t['weight'] : 100;
    });
    if (targets.length > 0 && weightSum <= 0) {
      problems.push({ path: `${base}.targetModels`, message: 'weights must sum to more than 0' });
    }
  });
  const rl = obj(s['rateLimit']);
  const redis = obj(obj(rl?.['global'])?.['redis']);
  if (redis && typeof redis['address'] === 'string' && !/^[^\s:]+:\d{1,5}$/.test(redis['address'])) {
    problems.push({ path: 'spec.rateLimit.global.redis.address', message: 'must be host:port' });
  }
  return problems;
}

/** Durations are shape-checked already; this converts one for callers that need milliseconds. */
export function durationMs(text: string | undefined, fallbackMs: number): number {
  return text === undefined ? fallbackMs : (parseGoDuration(text) ?? fallbackMs);
}
