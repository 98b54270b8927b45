import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatProblem } from './problems';
import { validateManifests, validateResource } from './validate';
import { httpRouteSupport } from './gateway-api/http-route-support';
import { HttpRouteSpecSchema } from './gateway-api/schemas';
import { matchesLabelSelector } from './gateway-api/label-selector';
import { normalizeCredential } from './external-model-provider';

const problemsOf = (o: unknown) => validateResource(o).problems.map(formatProblem);
const warningsOf = (o: unknown) => validateResource(o).warnings.map(formatProblem);

function provider(spec: Record<string, unknown>) {
  return {
    apiVersion: 'networking.serving.volcano.sh/v1alpha1',
    kind: 'ExternalModelProvider',
    metadata: { name: 'openai' },
    spec: { baseURL: 'https://api.openai.com', ...spec },
  };
}

describe('ExternalModelProvider validation (Kthena webhook rules)', () => {
  it("accepts Kthena's shape and applies its defaults", () => {
    const r = validateResource(
      provider({ auth: { secretRef: { name: 'key', key: 'token' } }, headers: { 'OpenAI-Organization': 'org-1' } }),
    );
    expect(r.status).toBe('valid');
    expect(r.status === 'valid' && r.value.kind === 'ExternalModelProvider' && r.value.spec).toMatchObject({
      providerType: 'OpenAI',
      insecureSkipVerify: false,
    });
  });

  const cases: [string, Record<string, unknown>, string[]][] = [
    ['plain http', { baseURL: 'http://api.example.com' }, ['spec.baseURL: must start with https://']],
    ['no host', { baseURL: 'https://' }, ['spec.baseURL: must start with https://']],
    ['userinfo', { baseURL: 'https://user:pw@api.example.com' }, ['spec.baseURL: must not contain userinfo, query, or fragment']],
    ['query', { baseURL: 'https://api.example.com/v1?x=1' }, ['spec.baseURL: must not contain userinfo, query, or fragment']],
    ['bare fragment', { baseURL: 'https://api.example.com/#' }, ['spec.baseURL: must not contain userinfo, query, or fragment']],
    ['unknown type', { providerType: 'Gemini' }, ['spec.providerType: Invalid option: expected one of "OpenAI"|"Anthropic"']],
    [
      'unknown scheme',
      { auth: { scheme: 'Basic', secretRef: { name: 's', key: 'k' } } },
      ['spec.auth.scheme: Invalid option: expected one of "Bearer"|"APIKey"'],
    ],
    [
      'reserved header',
      { headers: { Authorization: 'x' } },
      ['spec.headers.Authorization: header is reserved and cannot be configured as a static header'],
    ],
    ['bad header name', { headers: { 'bad header': 'x' } }, ['spec.headers["bad header"]: header name is invalid']],
    ['CRLF in value', { headers: { 'x-team': 'a\r\nx-evil: 1' } }, ['spec.headers["x-team"]: header value must not contain CR or LF']],
    ['secret without name', { auth: { secretRef: { key: 'k' } } }, ['spec.auth.secretRef.name: secret name is required']],
    [
      'optional secret',
      { auth: { secretRef: { name: 's', key: 'k', optional: true } } },
      ['spec.auth.secretRef.optional: optional must be false or unset'],
    ],
    ['model too long', { model: 'm'.repeat(257) }, ['spec.model: Too big: expected string to have <=256 characters']],
  ];
  it.each(cases)('%s', (_name, spec, expected) => {
    expect(problemsOf(provider(spec))).toEqual(expected);
  });

  it('normalizes credentials as Kthena does, and never repeats the value in a message', () => {
    expect(normalizeCredential('  sk-abc\n')).toEqual({ ok: true, token: 'sk-abc' });
    expect(normalizeCredential(undefined)).toMatchObject({ ok: false, reason: 'CredentialKeyNotFound' });
    expect(normalizeCredential('   ')).toMatchObject({ ok: false, reason: 'CredentialInvalid' });
    const bad = normalizeCredential('sk-secret\u0007tail');
    expect(bad).toMatchObject({ ok: false, reason: 'CredentialInvalid' });
    expect(JSON.stringify(bad)).not.toContain('sk-secret');
  });
});

describe('warnings: what the API server would drop or refuse', () => {
  const server = (pdGroup: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    apiVersion: 'networking.serving.volcano.sh/v1alpha1',
    kind: 'ModelServer',
    metadata: { name: 'ms' },
    spec: {
      inferenceEngine: 'vLLM',
      pipelineMode: 'epd',
      workloadPort: { port: 8000 },
      workloadSelector: { matchLabels: { app: 'a' }, pdGroup },
      ...extra,
    },
  });
  const epd = { groupKey: 'g', encodeLabels: { r: 'e' }, prefillLabels: {}, decodeLabels: { r: 'd' } };

  it('names a misspelt field, with a suggestion, and the object stays valid', () => {
    const r = validateResource(server({ ...epd, encodeLables: { r: 'x' } }, { ecConnecter: { type: 'shm' } }));
    expect(r.status).toBe('valid');
    expect(r.warnings.map(formatProblem)).toEqual([
      "spec.workloadSelector.pdGroup.encodeLables: unknown field; the API server drops it (did you mean 'encodeLabels'?)",
      "spec.ecConnecter: unknown field; the API server drops it (did you mean 'ecConnector'?)",
    ]);
  });

  it('E→PD with prefillLabels omitted is valid for Triad but required by the CRD', () => {
    const { prefillLabels: _p, ...omitted } = epd;
    expect(problemsOf(server(omitted))).toEqual([]);
    expect(warningsOf(server(omitted))).toEqual([
      'spec.workloadSelector.pdGroup.prefillLabels: required by the CRD; the API server refuses the object without it (write prefillLabels: {} for epd without a prefill stage (E→PD))',
    ]);
    expect(warningsOf(server(epd))).toEqual([]);
  });

  it('a route without rules, and unknown fields deep in arrays and maps', () => {
    const route = {
      apiVersion: 'networking.serving.volcano.sh/v1alpha1',
      kind: 'ModelRoute',
      metadata: { name: 'r' },
      spec: { modelName: 'm', rateLimit: { inputTokensPerUnit: 5 }, parentRefs: [{ name: 'gw', sectoinName: 'http' }] },
    };
    expect(problemsOf(route)).toEqual([]);
    expect(warningsOf(route)).toEqual([
      "spec.parentRefs[0].sectoinName: unknown field; the API server drops it (did you mean 'sectionName'?)",
      'spec.rules: required by the CRD; the API server refuses the object without it (write rules: [] for a route that matches nothing)',
    ]);
    const withRules = {
      ...route,
      spec: {
        modelName: 'm',
        rules: [{ targetModels: [{ modelServerName: 'a', wieght: 5 }], modelMatch: { headers: { x: { exakt: 'y' } } } }],
      },
    };
    expect(warningsOf(withRules)).toEqual([
      "spec.rules[0].targetModels[0].wieght: unknown field; the API server drops it (did you mean 'weight'?)",
      "spec.rules[0].modelMatch.headers.x.exakt: unknown field; the API server drops it (did you mean 'exact'?)",
    ]);
  });
});

describe('Gateway API kinds', () => {
  const fixture = readFileSync(join(__dirname, '__fixtures__/kthena-examples.yaml'), 'utf8');

  it("reads Kthena's Gateway, HTTPRoute and InferencePool examples", () => {
    const kinds = validateManifests(fixture).filter((r) => ['Gateway', 'HTTPRoute', 'InferencePool'].includes(r.kind));
    expect(kinds.map((r) => [r.kind, r.status])).toEqual([
      ['Gateway', 'valid'],
      ['HTTPRoute', 'valid'],
      ['InferencePool', 'valid'],
    ]);
  });

  const route = (rules: unknown[]) => ({
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    metadata: { name: 'r', namespace: 'llm' },
    spec: { rules },
  });
  const pool = { group: 'inference.networking.k8s.io', kind: 'InferencePool', name: 'p' };

  it('warns about every match, filter and backend it does not serve', () => {
    const r = route([
      {
        matches: [{ path: { type: 'Exact', value: '/v1/chat' } }, { method: 'POST', headers: [{ name: 'x', value: 'y' }] }],
        backendRefs: [pool, { name: 'svc', port: 80 }],
      },
      { filters: [{ type: 'RequestHeaderModifier', requestHeaderModifier: {} }], backendRefs: [pool] },
    ]);
    expect(validateResource(r).status).toBe('valid');
    expect(warningsOf(r)).toEqual([
      'spec.rules[0].matches[1]: method, headers matching is not supported (paths only); this match is ignored',
      "spec.rules[0].backendRefs[1]: kind Service (group '') is not supported; only inference.networking.k8s.io InferencePool backends get traffic",
      'spec.rules[1].filters[0]: filter RequestHeaderModifier is not supported; the rule is not served',
    ]);
  });

  it('serves the supported subset: explicit default match, nothing for a rule whose matches are all unsupported', () => {
    const spec = HttpRouteSpecSchema.parse({
      rules: [
        { backendRefs: [{ ...pool, weight: 3 }] },
        { matches: [{ queryParams: [{ name: 'a', value: 'b' }] }], backendRefs: [pool] },
        {
          matches: [{ path: { type: 'PathPrefix', value: '/v1' } }],
          filters: [{ type: 'URLRewrite', urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/' } } }],
          backendRefs: [{ ...pool, namespace: 'other' }],
        },
      ],
    });
    const support = httpRouteSupport(spec, 'llm');
    expect(support.rules.map((r) => [r.index, r.matches, r.backends])).toEqual([
      [0, [{ type: 'PathPrefix', value: '/' }], [{ namespace: 'llm', name: 'p', weight: 3 }]],
      [1, [], [{ namespace: 'llm', name: 'p', weight: 1 }]],
      [2, [{ type: 'PathPrefix', value: '/v1' }], [{ namespace: 'other', name: 'p', weight: 1 }]],
    ]);
    expect(support.rules[2]?.urlRewrite).toEqual({ path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/' } });
  });

  it('rejects a regex that does not compile, a relative path, duplicate listeners, an empty pool selector', () => {
    expect(
      problemsOf(route([{ matches: [{ path: { type: 'RegularExpression', value: '(' } }, { path: { type: 'Exact', value: 'v1' } }] }])),
    ).toEqual([
      expect.stringMatching(/^spec\.rules\[0\]\.matches\[0\]\.path\.value: regex does not compile/),
      "spec.rules[0].matches[1].path.value: must start with '/'",
    ]);
    const gw = {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'Gateway',
      metadata: { name: 'g' },
      spec: {
        gatewayClassName: 'triad',
        listeners: [
          { name: 'a', port: 80, protocol: 'HTTP' },
          { name: 'a', port: 81, protocol: 'HTTP' },
        ],
      },
    };
    expect(problemsOf(gw)).toEqual(["spec.listeners[1].name: duplicate listener name 'a'"]);
    const ip = {
      apiVersion: 'inference.networking.k8s.io/v1',
      kind: 'InferencePool',
      metadata: { name: 'p', annotations: { 'triad.io/inference-engine': 'TGI' } },
      spec: { selector: { matchLabels: {} }, targetPorts: [{ number: 8000 }] },
    };
    expect(problemsOf(ip)).toEqual([
      'spec.selector.matchLabels: must have at least one label',
      'metadata.annotations["triad.io/inference-engine"]: must be vLLM or SGLang, got \'TGI\'',
    ]);
    expect(problemsOf({ ...gw, apiVersion: 'gateway.networking.k8s.io/v1beta1' })).toEqual([
      'apiVersion: must be gateway.networking.k8s.io/v1',
    ]);
  });

  it('evaluates label selectors with expressions', () => {
    const labels = { team: 'a', env: 'prod' };
    expect(matchesLabelSelector(labels, {})).toBe(true);
    expect(
      matchesLabelSelector(labels, {
        matchLabels: { team: 'a' },
        matchExpressions: [{ key: 'env', operator: 'In', values: ['prod', 'dev'] }],
      }),
    ).toBe(true);
    expect(matchesLabelSelector(labels, { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] })).toBe(false);
    expect(
      matchesLabelSelector(labels, {
        matchExpressions: [
          { key: 'tier', operator: 'DoesNotExist' },
          { key: 'team', operator: 'Exists' },
        ],
      }),
    ).toBe(true);
    expect(matchesLabelSelector(undefined, { matchExpressions: [{ key: 'team', operator: 'Exists' }] })).toBe(false);
  });
});
