import { buildCrds } from './crd-generator';
import { formatPath, type ValidationProblem } from './problems';

type Node = Record<string, unknown>;

let roots: Map<string, Node> | undefined;

/** The generated CRDs' root schemas by kind (built once, on first use). */
function rootSchema(kind: string): Node | undefined {
  roots ??= new Map(
    buildCrds().map((crd) => {
      const spec = crd['spec'] as Node;
      const version = (spec['versions'] as Node[])[0];
      return [(spec['names'] as Node)['kind'] as string, (version['schema'] as Node)['openAPIV3Schema'] as Node];
    }),
  );
  return roots.get(kind);
}

/** Extra words for fields the API server requires where Triad's own rules would not. */
const REQUIRED_HINTS: Readonly<Record<string, string>> = {
  'spec.workloadSelector.pdGroup.prefillLabels': 'write prefillLabels: {} for epd without a prefill stage (E→PD)',
  'spec.rules': 'write rules: [] for a route that matches nothing',
};

/** Levenshtein distance, capped: only small distances matter for a suggestion. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) {
      const substitute = prev[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1);
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, substitute);
    }
    prev = row;
  }
  return prev[y.length];
}

function suggestion(key: string, known: readonly string[]): string {
  const best = known.map((k) => [k, distance(key, k)] as const).sort((a, b) => a[1] - b[1])[0];
  return best && best[1] <= Math.max(2, Math.floor(key.length / 4)) ? ` (did you mean '${best[0]}'?)` : '';
}

const isObject = (v: unknown): v is Node => !!v && typeof v === 'object' && !Array.isArray(v);

function walk(value: unknown, schema: Node, path: PropertyKey[], out: ValidationProblem[]): void {
  if (schema['x-kubernetes-preserve-unknown-fields'] === true) return;
  if (Array.isArray(value)) {
    const items = schema['items'];
    if (isObject(items)) value.forEach((v, i) => walk(v, items, [...path, i], out));
    return;
  }
  if (!isObject(value)) return;
  const props = schema['properties'];
  if (isObject(props)) {
    for (const [key, v] of Object.entries(value)) {
      const child = props[key];
      if (isObject(child)) walk(v, child, [...path, key], out);
      else
        out.push({
          path: formatPath([...path, key]),
          message: `unknown field; the API server drops it${suggestion(key, Object.keys(props))}`,
        });
    }
    for (const key of (schema['required'] as string[] | undefined) ?? []) {
      // The API server applies defaults before it checks `required`.
      if (value[key] !== undefined || (props[key] as Node | undefined)?.['default'] !== undefined) continue;
      const where = formatPath([...path, key]);
      const hint = REQUIRED_HINTS[where.replace(/\[\d+\]/g, '')];
      out.push({ path: where, message: `required by the CRD; the API server refuses the object without it${hint ? ` (${hint})` : ''}` });
    }
    return;
  }
  const each = schema['additionalProperties'];
  if (isObject(each)) for (const [key, v] of Object.entries(value)) walk(v, each, [...path, key], out);
}

/**
 * What the API server would do differently from Triad with this object, per its generated CRD: fields it would
 * drop (unknown to the schema: a misspelt `encodeLables` is silently pruned) and fields it requires where
 * Triad's own rules do not. Metadata is not walked (the API server validates it as ObjectMeta). Kinds without a
 * Triad CRD give nothing.
 */
export function crdSchemaWarnings(kind: string, raw: unknown): ValidationProblem[] {
  const root = rootSchema(kind);
  if (!root || !isObject(raw)) return [];
  const out: ValidationProblem[] = [];
  const { metadata: _metadata, ...rest } = raw;
  walk(rest, root, [], out);
  return out;
}
