import type { ValidationProblem } from '../problems';
import { INFERENCE_ENGINE_ANNOTATION } from './schemas';

type Raw = Record<string, unknown> | undefined;
const obj = (v: unknown): Raw => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
const list = (v: unknown): Record<string, unknown>[] => (Array.isArray(v) ? v.map((x) => obj(x) ?? {}) : []);

/** Gateway rules its shape cannot express: listener names are unique (they key attachments). */
export function gatewayRules(spec: unknown): ValidationProblem[] {
  const seen = new Set<string>();
  const problems: ValidationProblem[] = [];
  list(obj(spec)?.['listeners']).forEach((l, i) => {
    const name = l['name'];
    if (typeof name !== 'string') return;
    if (seen.has(name)) problems.push({ path: `spec.listeners[${i}].name`, message: `duplicate listener name '${name}'` });
    seen.add(name);
  });
  return problems;
}

/** HTTPRoute rules: paths start with `/`, regular expressions compile (JavaScript syntax, as Triad runs them). */
export function httpRouteRules(spec: unknown): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  list(obj(spec)?.['rules']).forEach((rule, i) => {
    list(rule['matches']).forEach((m, j) => {
      const path = obj(m['path']);
      if (!path || typeof path['value'] !== 'string') return;
      const where = `spec.rules[${i}].matches[${j}].path.value`;
      if (path['type'] === 'RegularExpression') {
        try {
          new RegExp(path['value']);
        } catch (err) {
          problems.push({ path: where, message: `regex does not compile: ${(err as Error).message}` });
        }
      } else if (!path['value'].startsWith('/')) {
        problems.push({ path: where, message: "must start with '/'" });
      }
    });
  });
  return problems;
}

/** InferencePool rules: a selector with at least one label, and a known engine annotation. */
export function inferencePoolRules(spec: unknown, metadata: unknown): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  const labels = obj(obj(obj(spec)?.['selector'])?.['matchLabels']);
  if (obj(spec) && (!labels || Object.keys(labels).length === 0)) {
    problems.push({ path: 'spec.selector.matchLabels', message: 'must have at least one label' });
  }
  const engine = obj(obj(metadata)?.['annotations'])?.[INFERENCE_ENGINE_ANNOTATION];
  if (engine !== undefined && engine !== 'vLLM' && engine !== 'SGLang') {
    const path = `metadata.annotations[${JSON.stringify(INFERENCE_ENGINE_ANNOTATION)}]`;
    problems.push({ path, message: `must be vLLM or SGLang, got '${String(engine)}'` });
  }
  return problems;
}
