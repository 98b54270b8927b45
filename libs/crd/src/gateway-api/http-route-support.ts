import type { ValidationProblem } from '../problems';
import { INFERENCE_API_GROUP, type HttpPathMatch, type HttpRouteSpec, type HttpUrlRewrite } from './schemas';

/** A backend Triad serves: an InferencePool (its namespace defaults to the route's). */
export interface ServedBackend {
  readonly namespace: string;
  readonly name: string;
  readonly weight: number;
}

/** One HTTPRoute rule as Triad serves it. */
export interface ServedRule {
  /** Position in `spec.rules` (ties between equally specific matches go to the earlier rule). */
  readonly index: number;
  readonly name?: string;
  /**
   * Path matches, explicit: a rule without `matches` gets Gateway API's default (PathPrefix `/`); an empty list
   * means the rule matches nothing (every match used a predicate Triad does not evaluate, or a filter is not
   * supported).
   */
  readonly matches: readonly HttpPathMatch[];
  readonly backends: readonly ServedBackend[];
  readonly urlRewrite?: HttpUrlRewrite;
}

/** Why part of a route is not served as written. */
export interface UnsupportedFeature extends ValidationProblem {
  /** `UnsupportedValue` (a predicate or filter Triad does not implement) or `InvalidKind` (a backend kind). */
  readonly reason: 'UnsupportedValue' | 'InvalidKind';
}

export interface HttpRouteSupport {
  readonly rules: readonly ServedRule[];
  readonly unsupported: readonly UnsupportedFeature[];
}

const DEFAULT_MATCH: HttpPathMatch = { type: 'PathPrefix', value: '/' };

function isInferencePool(ref: { group?: string | undefined; kind?: string | undefined }): boolean {
  return ref.group === INFERENCE_API_GROUP && ref.kind === 'InferencePool';
}

/**
 * What Triad serves of an HTTPRoute, and what it does not (Kthena's subset): path matches (Exact, PathPrefix,
 * RegularExpression), route hostnames, weighted InferencePool backends and the URLRewrite filter. A match that
 * also tests the method, headers or query parameters is left out, never widened to its path alone; a rule with
 * another filter kind is not served at all (it would change the request in a way Triad cannot honour); other
 * backend kinds get no traffic. Each omission is listed, for the route's status and `triad validate`.
 */
export function httpRouteSupport(spec: HttpRouteSpec, namespace: string): HttpRouteSupport {
  const unsupported: UnsupportedFeature[] = [];
  const rules: ServedRule[] = [];
  const source = spec.rules ?? [{}];
  source.forEach((rule, i) => {
    const base = `spec.rules[${i}]`;
    const matches: HttpPathMatch[] = [];
    (rule.matches ?? [{}]).forEach((m, j) => {
      const used = [
        m.method !== undefined ? 'method' : '',
        m.headers?.length ? 'headers' : '',
        m.queryParams?.length ? 'queryParams' : '',
      ].filter(Boolean);
      if (used.length > 0) {
        const message = `${used.join(', ')} matching is not supported (paths only); this match is ignored`;
        unsupported.push({ path: `${base}.matches[${j}]`, reason: 'UnsupportedValue', message });
        return;
      }
      matches.push(m.path ?? DEFAULT_MATCH);
    });
    let urlRewrite: HttpUrlRewrite | undefined;
    let disabled = false;
    (rule.filters ?? []).forEach((f, j) => {
      if (f.type === 'URLRewrite' && f.urlRewrite) urlRewrite = f.urlRewrite;
      else {
        disabled = true;
        const message = `filter ${f.type} is not supported; the rule is not served`;
        unsupported.push({ path: `${base}.filters[${j}]`, reason: 'UnsupportedValue', message });
      }
    });
    const backends: ServedBackend[] = [];
    (rule.backendRefs ?? []).forEach((ref, k) => {
      const path = `${base}.backendRefs[${k}]`;
      if (!isInferencePool(ref)) {
        const what = `kind ${ref.kind ?? 'Service'} (group '${ref.group ?? ''}')`;
        unsupported.push({
          path,
          reason: 'InvalidKind',
          message: `${what} is not supported; only ${INFERENCE_API_GROUP} InferencePool backends get traffic`,
        });
        return;
      }
      if (ref.filters?.length) {
        disabled = true;
        const message = 'backendRef filters are not supported; the rule is not served';
        unsupported.push({ path: `${path}.filters`, reason: 'UnsupportedValue', message });
      }
      backends.push({ namespace: ref.namespace ?? namespace, name: ref.name, weight: ref.weight });
    });
    const named = rule.name ? { name: rule.name } : {};
    rules.push({ index: i, ...named, matches: disabled ? [] : matches, backends, ...(urlRewrite ? { urlRewrite } : {}) });
  });
  return { rules, unsupported };
}
