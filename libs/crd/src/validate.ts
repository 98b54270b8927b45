import type { z } from 'zod';
import { LineCounter, parseAllDocuments } from 'yaml';
import { crdSchemaWarnings } from './crd-warnings';
import { ExternalModelProviderSchema, type ExternalModelProvider } from './external-model-provider';
import {
  GATEWAY_API_VERSION,
  GatewaySchema,
  HttpRouteSchema,
  INFERENCE_POOL_API_VERSION,
  InferencePoolSchema,
  type Gateway,
  type HttpRoute,
  type InferencePool,
} from './gateway-api/schemas';
import { httpRouteSupport } from './gateway-api/http-route-support';
import { gatewayRules, httpRouteRules, inferencePoolRules } from './gateway-api/rules';
import { ModelServerSchema, API_VERSION, type ModelServer } from './model-server';
import { ModelRouteSchema, type ModelRoute } from './model-route';
import { PodSchema, type Pod } from './pod';
import { externalModelProviderRules } from './provider-rules';
import { modelRouteRules, modelServerRules } from './semantic-rules';
import { locateProblem } from './locate';
import { formatPath, type ValidationProblem } from './problems';

export type TriadResource = ModelServer | ModelRoute | ExternalModelProvider | Pod | Gateway | HttpRoute | InferencePool;
export type ResourceKind = TriadResource['kind'];

/**
 * Outcome of validating one object. `skipped` objects are kinds Triad does not read (Deployments, Services...).
 * `warnings` never make an object invalid: fields the API server would drop or require (Triad's CRD kinds), and
 * Gateway API features Triad does not serve.
 */
type Problems = readonly ValidationProblem[];
export type ResourceValidation =
  | {
      readonly status: 'valid';
      readonly kind: ResourceKind;
      readonly name: string;
      readonly namespace: string;
      readonly value: TriadResource;
      readonly problems: readonly [];
      readonly warnings: Problems;
    }
  | {
      readonly status: 'invalid';
      readonly kind: string;
      readonly name?: string;
      readonly namespace?: string;
      readonly problems: Problems;
      readonly warnings: Problems;
    }
  | {
      readonly status: 'skipped';
      readonly kind: string;
      readonly name?: string;
      readonly namespace?: string;
      readonly problems: readonly [];
      readonly warnings: readonly [];
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

type Rules = (raw: Record<string, unknown>) => ValidationProblem[];

function check<T extends TriadResource>(
  schema: z.ZodType<T>,
  rules: Rules,
  raw: Record<string, unknown>,
  warnings: Rules = () => [],
): ResourceValidation {
  const parsed = schema.safeParse(raw);
  const problems = [...(parsed.success ? [] : zodProblems(parsed.error)), ...rules(raw)];
  const id = identity(raw);
  const found = warnings(raw);
  if (parsed.success && problems.length === 0) {
    const value = parsed.data;
    return {
      status: 'valid',
      kind: value.kind,
      name: value.metadata.name,
      namespace: value.metadata.namespace,
      value,
      problems: [],
      warnings: found,
    };
  }
  return { status: 'invalid', ...id, problems, warnings: found };
}

interface KindCheck {
  readonly apiVersion: string;
  readonly run: (raw: Record<string, unknown>) => ResourceValidation;
}

const spec = (raw: Record<string, unknown>) => raw['spec'];
const crdWarnings = (raw: Record<string, unknown>) => crdSchemaWarnings(String(raw['kind']), raw);

function routeSupportWarnings(raw: Record<string, unknown>): ValidationProblem[] {
  const parsed = HttpRouteSchema.shape.spec.safeParse(raw['spec']);
  const namespace = identity(raw).namespace ?? 'default';
  return parsed.success ? httpRouteSupport(parsed.data, namespace).unsupported.map(({ path, message }) => ({ path, message })) : [];
}

/** Every kind Triad reads, with the apiVersion it must have and its checks. */
const KINDS: Readonly<Record<string, KindCheck>> = {
  ModelServer: { apiVersion: API_VERSION, run: (raw) => check(ModelServerSchema, (r) => modelServerRules(spec(r)), raw, crdWarnings) },
  ModelRoute: { apiVersion: API_VERSION, run: (raw) => check(ModelRouteSchema, (r) => modelRouteRules(spec(r)), raw, crdWarnings) },
  ExternalModelProvider: {
    apiVersion: API_VERSION,
    run: (raw) => check(ExternalModelProviderSchema, (r) => externalModelProviderRules(spec(r)), raw, crdWarnings),
  },
  Pod: { apiVersion: 'v1', run: (raw) => check(PodSchema, () => [], raw) },
  Gateway: { apiVersion: GATEWAY_API_VERSION, run: (raw) => check(GatewaySchema, (r) => gatewayRules(spec(r)), raw) },
  HTTPRoute: {
    apiVersion: GATEWAY_API_VERSION,
    run: (raw) => check(HttpRouteSchema, (r) => httpRouteRules(spec(r)), raw, routeSupportWarnings),
  },
  InferencePool: {
    apiVersion: INFERENCE_POOL_API_VERSION,
    run: (raw) => check(InferencePoolSchema, (r) => inferencePoolRules(spec(r), r['metadata']), raw),
  },
};

/** Kinds `validateResource` checks (everything else is `skipped`). */
export const VALIDATED_KINDS: readonly string[] = Object.keys(KINDS);

/**
 * Validates one object: Triad's kinds (ModelServer, ModelRoute, ExternalModelProvider), Pods, and the Gateway
 * API kinds Triad reads (Gateway, HTTPRoute, InferencePool, in the one version Triad watches); other kinds are
 * skipped.
 */
export function validateResource(raw: unknown): ResourceValidation {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    return {
      status: 'invalid',
      kind: '(not an object)',
      problems: [{ path: '', message: 'a document must be a YAML/JSON object' }],
      warnings: [],
    };
  }
  const o = raw as Record<string, unknown>;
  const id = identity(o);
  if (o['kind'] === undefined) return { status: 'invalid', ...id, problems: [{ path: 'kind', message: 'is required' }], warnings: [] };
  const known = typeof o['kind'] === 'string' ? KINDS[o['kind']] : undefined;
  if (!known) return { status: 'skipped', ...id, problems: [], warnings: [] };
  if (o['apiVersion'] !== undefined && o['apiVersion'] !== known.apiVersion) {
    return { status: 'invalid', ...id, problems: [{ path: 'apiVersion', message: `must be ${known.apiVersion}` }], warnings: [] };
  }
  return known.run(o);
}

/**
 * One YAML document's validation, with the 1-based line where the document starts; each problem and warning
 * carries the line and column of its own field.
 */
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
      const problems = doc.errors.map((e) => {
        const at = lineCounter.linePos(e.pos[0]);
        return { path: '', message: `YAML syntax error at line ${at.line}: ${e.message.split('\n')[0]}`, line: at.line, column: at.col };
      });
      results.push({ status: 'invalid', kind: '(unparsed)', problems, warnings: [], line });
      continue;
    }
    const value = doc.toJS({ maxAliasCount: 100 }) as unknown;
    if (value === null || value === undefined) continue;
    const r = validateResource(value);
    const locate = (p: ValidationProblem) => locateProblem(doc, p, lineCounter);
    results.push({ ...r, problems: r.problems.map(locate), warnings: r.warnings.map(locate), line } as DocumentValidation);
  }
  return results;
}
