import type { z } from 'zod';
import { LineCounter, parseAllDocuments } from 'yaml';
import { ModelServerSchema, API_VERSION, type ModelServer } from './model-server';
import { ModelRouteSchema, type ModelRoute } from './model-route';
import { PodSchema, type Pod } from './pod';
import { modelRouteRules, modelServerRules } from './semantic-rules';
import { formatPath, type ValidationProblem } from './problems';

export type TriadResource = ModelServer | ModelRoute | Pod;
export type ResourceKind = TriadResource['kind'];

/** Outcome of validating one object. `skipped` objects are kinds Triad does not read (Deployments, Services...). */
export type ResourceValidation =
  | {
    readonly status: 'valid';
    readonly kind: ResourceKind;
    readonly name: string;
    readonly namespace: string;
    readonly value: TriadResource;
    readonly problems: readonly [];
  }
  | {
    readonly status: 'invalid';
    readonly kind: string;
    readonly name?: string;
    readonly namespace?: string;
    readonly problems: readonly ValidationProblem[];
  }
  | {
    readonly status: 'skipped';
    readonly kind: string;
    readonly name?: string;
    readonly namespace?: string;
    readonly problems: readonly [];
  };

function zodProblems(error: z.ZodError): ValidationProblem[] {
  return error.issues.map((issue) => ({ path: formatPath(issue.path), message: issue.message }));
}

function identity(raw: Record<string, unknown>): { kind: string; name?: string; namespace?: string } {
  const meta = (raw['metadata'] ?? {}) as Record<string, unknown>;
  return {
    kind: typeof raw['kind'] === 'string' ? raw['kind'] : '(no kind)',
    ...(typeof meta['name'] === 'string' ? { name: meta['name'] } : {}),
    namespace: typeof meta['namespace'] === 'string' ? meta['namespace'] : 'default',
  };
}

function check<T extends TriadResource>(
  schema: z.ZodType<T>, rules: (spec: unknown) => ValidationProblem[], raw: Record<string, unknown>,
): ResourceValidation {
  const parsed = schema.safeParse(raw);
  const problems = [...(parsed.success ? [] : zodProblems(parsed.error)), ...rules(raw['spec'])];
  const id = identity(raw);
  if (parsed.success && problems.length === 0) {
    const value = parsed.data;
    return { status: 'valid', kind: value.kind, name: value.metadata.name, namespace: value.metadata.namespace, value, problems: [] };
  }
  return { status: 'invalid', ...id, problems };
}

/** Validates one object of any kind: ModelServer, ModelRoute and Pod are checked, other kinds are skipped. */
export function validateResource(raw: unknown): ResourceValidation {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    return { status: 'invalid', kind: '(not an object)', problems: [{ path: '', message: 'a document must be a YAML/JSON object' }] };
  }
  const o = raw as Record<string, unknown>;
  const id = identity(o);
  switch (o['kind']) {
    case 'ModelServer':
      return o['apiVersion'] === API_VERSION || o['apiVersion'] === undefined
        ? check(ModelServerSchema, modelServerRules, o)
        : { status: 'invalid', ...id, problems: [{ path: 'apiVersion', message: `must be ${API_VERSION}` }] };
    case 'ModelRoute':
      return o['apiVersion'] === API_VERSION || o['apiVersion'] === undefined
        ? check(ModelRouteSchema, modelRouteRules, o)
        : { status: 'invalid', ...id, problems: [{ path: 'apiVersion', message: `must be ${API_VERSION}` }] };
    case 'Pod':
      return check(PodSchema, () => [], o);
    case undefined:
      return { status: 'invalid', ...id, problems: [{ path: 'kind', message: 'is required' }] };
    default:
      return { status: 'skipped', ...id, problems: [] };
  }
}

/** One YAML document's validation, with the 1-based line where the document starts. */
export type DocumentValidation = ResourceValidation & { readonly line: number };

/**
 * Parses multi-document YAML and validates each document. YAML syntax errors become `invalid` entries with the
 * line of the error; empty documents are ignored.
 */
export function validateManifests(text: string): DocumentValidation[] {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false });
  const list = Array.isArray(docs) ? docs : [docs];
  const results: DocumentValidation[] = [];
  for (const doc of list) {
    // The document's content start, not its `---` marker, is the line a user looks for.
    const start = doc.contents?.range?.[0] ?? doc.range?.[0] ?? 0;
    const line = lineCounter.linePos(start).line;
    if (doc.errors.length > 0) {
      const problems = doc.errors.map((e) => ({
        path: '', message: `YAML syntax error at line ${lineCounter.linePos(e.pos[0]).line}: ${e.message.split('\n')[0]}`,
      }));
      results.push({ status: 'invalid', kind: '(unparsed)', problems, line });
      continue;
    }
    const value = doc.toJS({ maxAliasCount: 100 }) as unknown;
    if (value === null || value === undefined) continue;
    results.push({ ...validateResource(value), line });
  }
  return results;
}
