import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildCrds } from './crd-generator';

// Kthena's published CRD schema, as facts extracted by tools/scripts/kthena-crd-facts.mjs from Kthena's
// charts/kthena/charts/networking/crds. Triad's generated CRDs must be a strict superset: every Kthena field at
// the same path with the same type and default, every `required` list exactly Kthena's (Triad adds no required
// field to a Kthena object), enums that keep every Kthena value, and no bound Kthena does not have.

interface Fact {
  readonly path: string;
  readonly type?: string;
  readonly default?: unknown;
  readonly enum?: readonly unknown[];
  readonly required?: readonly string[];
  readonly minimum?: number;
  readonly maximum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly pattern?: string;
  readonly format?: string;
  readonly mapType?: string;
}
interface CrdFacts {
  readonly name: string;
  readonly group: string;
  readonly scope: string;
  readonly version: string;
  readonly subresources: readonly string[];
  readonly fields: readonly Fact[];
}

const facts = JSON.parse(readFileSync(join(__dirname, '__fixtures__/kthena-crd-facts.json'), 'utf8')) as {
  source: string;
  crds: Record<string, CrdFacts>;
};
type Node = Record<string, unknown>;
const triad = new Map(buildCrds().map((c) => [((c['spec'] as Node)['names'] as Node)['kind'] as string, c]));

const versionOf = (crd: Node) => ((crd['spec'] as Node)['versions'] as Node[])[0];
const rootOf = (crd: Node) => (versionOf(crd)['schema'] as Node)['openAPIV3Schema'] as Node;

/** The node at a fact path (`spec.rules[].targetModels[]`, `spec.headers{}`), or undefined. */
function nodeAt(root: Node, path: string): Node | undefined {
  if (path === '') return root;
  let node: Node | undefined = root;
  for (const part of path.match(/[^.[\]{}]+|\[\]|\{\}/g) ?? []) {
    if (!node) return undefined;
    if (part === '[]') node = node['items'] as Node | undefined;
    else if (part === '{}') node = node['additionalProperties'] as Node | undefined;
    else node = (node['properties'] as Record<string, Node> | undefined)?.[part];
  }
  return node;
}

/** Every way the Triad node at `fact.path` would accept less than Kthena's, or keep fewer fields. */
function differences(root: Node, fact: Fact): string[] {
  const node = nodeAt(root, fact.path);
  if (!node) return [`${fact.path}: missing`];
  const out: string[] = [];
  const at = fact.path || '(root)';
  if (fact.type !== undefined && node['type'] !== fact.type) out.push(`${at}: type ${String(node['type'])}, Kthena ${fact.type}`);
  const required = [...((node['required'] as string[] | undefined) ?? [])].sort();
  if (JSON.stringify(required) !== JSON.stringify(fact.required ?? []))
    out.push(`${at}: required [${required.join()}], Kthena [${(fact.required ?? []).join()}]`);
  if (JSON.stringify(node['default']) !== JSON.stringify(fact.default))
    out.push(`${at}: default ${JSON.stringify(node['default'])}, Kthena ${JSON.stringify(fact.default)}`);
  if (fact.enum) {
    const mine = (node['enum'] as unknown[] | undefined) ?? [];
    const lost = fact.enum.filter((v) => !mine.includes(v));
    if (lost.length > 0) out.push(`${at}: enum lacks ${JSON.stringify(lost)}`);
  } else if (node['enum'] !== undefined) out.push(`${at}: enum ${JSON.stringify(node['enum'])} where Kthena has none`);
  for (const lower of ['minimum', 'minLength', 'minItems'] as const) {
    const mine = node[lower] as number | undefined;
    if (mine !== undefined && (fact[lower] === undefined || mine > fact[lower]))
      out.push(`${at}: ${lower} ${mine}, Kthena ${String(fact[lower])}`);
  }
  for (const upper of ['maximum', 'maxLength', 'maxItems'] as const) {
    const mine = node[upper] as number | undefined;
    if (mine !== undefined && (fact[upper] === undefined || mine < fact[upper]))
      out.push(`${at}: ${upper} ${mine}, Kthena ${String(fact[upper])}`);
  }
  for (const exact of ['pattern', 'format'] as const) {
    if (node[exact] !== undefined && node[exact] !== fact[exact])
      out.push(`${at}: ${exact} ${String(node[exact])}, Kthena ${String(fact[exact])}`);
  }
  if (fact.mapType !== undefined && node['x-kubernetes-map-type'] !== fact.mapType)
    out.push(`${at}: x-kubernetes-map-type ${String(node['x-kubernetes-map-type'])}`);
  return out;
}

describe(`Triad's CRDs are a strict superset of Kthena's (${facts.source})`, () => {
  it('defines every Kthena CRD, same name, group, scope, version and subresources', () => {
    expect([...triad.keys()].sort()).toEqual(Object.keys(facts.crds).sort());
    for (const [kind, f] of Object.entries(facts.crds)) {
      const crd = triad.get(kind) as Node;
      const spec = crd['spec'] as Node;
      expect({
        kind,
        name: (crd['metadata'] as Node)['name'],
        group: spec['group'],
        scope: spec['scope'],
        version: versionOf(crd)['name'],
      }).toEqual({ kind, name: f.name, group: f.group, scope: f.scope, version: f.version });
      expect(Object.keys((versionOf(crd)['subresources'] as Node | undefined) ?? {}).sort()).toEqual(f.subresources);
    }
  });

  it.each(Object.keys(facts.crds))('%s keeps every Kthena field, requirement, default, enum value and bound', (kind) => {
    const f = facts.crds[kind];
    expect(f.fields.length).toBeGreaterThan(20);
    const root = rootOf(triad.get(kind) as Node);
    expect(f.fields.flatMap((fact) => differences(root, fact))).toEqual([]);
  });

  it('requires nothing Kthena does not at Triad-only paths of Kthena objects', () => {
    // A Triad-only field under a Kthena object (encodeLabels, workloadPort.encodePort, bootstrapPort…) is
    // optional: its parent's required list is Kthena's, checked above; here: the new fields exist at all.
    const ms = rootOf(triad.get('ModelServer') as Node);
    expect(nodeAt(ms, 'spec.pipelineMode')).toBeDefined();
    expect(nodeAt(ms, 'spec.workloadSelector.pdGroup.encodeLabels{}')).toEqual({ type: 'string' });
    expect(nodeAt(ms, 'spec.workloadPort.encodePort')).toMatchObject({ type: 'integer' });
    expect(nodeAt(ms, 'status.conditions[]')).toMatchObject({ type: 'object' });
  });

  it('the comparison catches a dropped field, a new requirement, a lost enum value and a tighter bound', () => {
    const root = rootOf(triad.get('ModelRoute') as Node);
    const strict = JSON.parse(JSON.stringify(root)) as Node;
    const spec = nodeAt(strict, 'spec') as Node;
    delete (spec['properties'] as Node)['loraAdapters'];
    (spec['required'] as string[]).push('modelName');
    (nodeAt(strict, 'spec.rateLimit.unit') as Node)['enum'] = ['second'];
    (nodeAt(strict, 'spec.rules') as Node)['maxItems'] = 4;
    const fields = facts.crds['ModelRoute']?.fields ?? [];
    expect(fields.flatMap((fact) => differences(strict, fact))).toEqual([
      'spec: required [modelName,rules], Kthena [rules]',
      'spec.loraAdapters: missing',
      'spec.loraAdapters[]: missing',
      'spec.rateLimit.unit: enum lacks ["minute","hour","day","month"]',
      'spec.rules: maxItems 4, Kthena 16',
    ]);
  });
});
