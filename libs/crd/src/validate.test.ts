import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validateManifests, validateResource } from './validate';
import { formatProblem } from './problems';
import { ModelServerSchema, resolvePipelineMode, rolePort, type ModelServer } from './model-server';
import { ModelRouteSchema } from './model-route';

const fixture = (name: string) => readFileSync(join(__dirname, '__fixtures__', name), 'utf8');

function server(spec: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'networking.serving.volcano.sh/v1alpha1',
    kind: 'ModelServer',
    metadata: { name: 'ms', namespace: 'default' },
    spec: { inferenceEngine: 'vLLM', workloadPort: { port: 8000 }, workloadSelector: { matchLabels: { app: 'a' } }, ...spec },
    ...extra,
  };
}
function route(spec: Record<string, unknown>) {
  return { apiVersion: 'networking.serving.volcano.sh/v1alpha1', kind: 'ModelRoute', metadata: { name: 'r' }, spec };
}
const problemsOf = (obj: unknown) => validateResource(obj).problems.map(formatProblem);
const epdGroup = {
  groupKey: 'group',
  encodeLabels: { role: 'encode' },
  prefillLabels: { role: 'prefill' },
  decodeLabels: { role: 'decode' },
};

describe('Kthena and EPD example manifests', () => {
  it.each(['kthena-examples.yaml', 'epd-examples.yaml'])('%s validates unchanged', (file) => {
    const results = validateManifests(fixture(file));
    expect(results.length).toBeGreaterThan(3);
    for (const r of results)
      expect({ name: r.name, problems: r.problems, warnings: r.warnings }).toEqual({ name: r.name, problems: [], warnings: [] });
  });
});

describe('ModelServer validation errors', () => {
  const cases: [string, Record<string, unknown>, string[]][] = [
    ['missing inferenceEngine', { inferenceEngine: undefined }, ['spec.inferenceEngine: Invalid option: expected one of "vLLM"|"SGLang"']],
    ['unknown engine', { inferenceEngine: 'TGI' }, ['spec.inferenceEngine: Invalid option: expected one of "vLLM"|"SGLang"']],
    ['port out of range', { workloadPort: { port: 70000 } }, ['spec.workloadPort.port: Too big: expected number to be <=65535']],
    [
      'bad protocol',
      { workloadPort: { port: 1, protocol: 'grpc' } },
      ['spec.workloadPort.protocol: Invalid option: expected one of "http"|"https"'],
    ],
    ['empty matchLabels', { workloadSelector: { matchLabels: {} } }, ['spec.workloadSelector.matchLabels: must have at least one label']],
    [
      'bad label key',
      { workloadSelector: { matchLabels: { 'bad key!': 'x' } } },
      ['spec.workloadSelector.matchLabels["bad key!"]: invalid label key \'bad key!\''],
    ],
    [
      'bad label value',
      { workloadSelector: { matchLabels: { app: 'has space' } } },
      ["spec.workloadSelector.matchLabels.app: invalid label value 'has space'"],
    ],
    [
      'bad duration',
      { trafficPolicy: { timeout: '10' } },
      ['spec.trafficPolicy.timeout: must be a Go duration such as 500ms, 10s or 1m30s'],
    ],
    [
      'bad retry interval',
      { trafficPolicy: { retry: { attempts: 2, retryInterval: 'soon' } } },
      ['spec.trafficPolicy.retry.retryInterval: must be a Go duration such as 500ms, 10s or 1m30s'],
    ],
    ['negative attempts', { trafficPolicy: { retry: { attempts: -1 } } }, ['spec.trafficPolicy.retry.attempts: must not be negative']],
    [
      'unknown kvConnector',
      { kvConnector: { type: 'p2p' } },
      ['spec.kvConnector.type: Invalid option: expected one of "http"|"lmcache"|"nixl"|"mooncake"'],
    ],
    [
      'Mooncake implementation on another KV connector',
      { kvConnector: { type: 'nixl', implementation: 'vllm' } },
      ['spec.kvConnector.implementation: only used with type mooncake; type is nixl'],
    ],
    [
      'NIXL transfer mode on another KV connector',
      { kvConnector: { type: 'mooncake', transferMode: 'pull' } },
      ['spec.kvConnector.transferMode: only used with type nixl; type is mooncake'],
    ],
    [
      'unknown Mooncake implementation',
      { kvConnector: { type: 'mooncake', implementation: 'sglang' } },
      ['spec.kvConnector.implementation: Invalid option: expected one of "auto"|"vllm"|"vllm-ascend"'],
    ],
    [
      'vLLM KV settings on SGLang',
      { inferenceEngine: 'SGLang', kvConnector: { type: 'nixl', transferMode: 'push' } },
      ['spec.kvConnector: implementation and transferMode are vLLM settings; inferenceEngine is SGLang'],
    ],
    [
      'unknown ecConnector',
      { ecConnector: { type: 'lmcache' } },
      [
        'spec.ecConnector.type: Invalid option: expected one of "shared-storage"|"nixl"|"mooncake"',
        'spec.ecConnector: only used when pipelineMode is epd; set pipelineMode: epd or remove it',
      ],
    ],
    [
      'ecConnector outside epd',
      { ecConnector: { type: 'nixl' } },
      ['spec.ecConnector: only used when pipelineMode is epd; set pipelineMode: epd or remove it'],
    ],
    [
      'ecConnector on SGLang',
      { inferenceEngine: 'SGLang', ecConnector: {} },
      ['spec.ecConnector: is a vLLM EPD setting; inferenceEngine is SGLang'],
    ],
    [
      'encoder batch out of range',
      {
        pipelineMode: 'epd',
        workloadSelector: { matchLabels: { app: 'a' }, pdGroup: epdGroup },
        ecConnector: { maxEncoderBatch: 65 },
      },
      ['spec.ecConnector.maxEncoderBatch: Too big: expected number to be <=64'],
    ],
    [
      'unknown pipelineMode',
      { pipelineMode: 'edp' },
      ['spec.pipelineMode: Invalid option: expected one of "aggregated"|"pd"|"epd"|"pd-disaggregated"|"vllm-epd"|"sglang-epd"'],
    ],
    ['model too long', { model: 'x'.repeat(257) }, ['spec.model: Too big: expected string to have <=256 characters']],
    [
      'engine credential and pass-through together',
      { engineAuth: { passThrough: true, credential: 'qwen-key' } },
      ["spec.engineAuth: passThrough and credential both set Authorization: choose one (the client's, or the named credential)"],
    ],
    [
      'engine secretRef and pass-through together',
      { engineAuth: { passThrough: true, secretRef: { name: 'engine-key', key: 'token' } } },
      ["spec.engineAuth: passThrough and secretRef both set Authorization: choose one (the client's, or the Secret's)"],
    ],
    [
      'engine secretRef and credential together',
      { engineAuth: { credential: 'qwen-key', secretRef: { name: 'engine-key', key: 'token' } } },
      ["spec.engineAuth: credential and secretRef both set Authorization: choose one (the gateway's file, or the namespace's Secret)"],
    ],
    [
      'engine secretRef without a key',
      { engineAuth: { secretRef: { name: 'engine-key' } } },
      ['spec.engineAuth.secretRef.key: Invalid input: expected string, received undefined'],
    ],
    [
      'engine secretRef with an empty name',
      { engineAuth: { secretRef: { name: '', key: 'token' } } },
      ['spec.engineAuth.secretRef.name: Too small: expected string to have >=1 characters'],
    ],
    [
      'engine credential that is a path',
      { engineAuth: { credential: '../gateway/key' } },
      ['spec.engineAuth.credential: Invalid string: must match pattern /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/'],
    ],
    ['epd without pdGroup', { pipelineMode: 'epd' }, ['spec.workloadSelector.pdGroup: required when pipelineMode is epd']],
    ['pd without pdGroup', { pipelineMode: 'pd' }, ['spec.workloadSelector.pdGroup: required when pipelineMode is pd']],
    [
      'epd without encodeLabels',
      {
        pipelineMode: 'epd',
        workloadSelector: { matchLabels: { app: 'a' }, pdGroup: { ...epdGroup, encodeLabels: undefined } },
      },
      ['spec.workloadSelector.pdGroup.encodeLabels: required when pipelineMode is epd'],
    ],
    [
      'epd with empty decodeLabels',
      {
        pipelineMode: 'epd',
        workloadSelector: { matchLabels: { app: 'a' }, pdGroup: { ...epdGroup, decodeLabels: {} } },
      },
      ['spec.workloadSelector.pdGroup.decodeLabels: required when pipelineMode is epd'],
    ],
    ['missing matchLabels', { workloadSelector: {} }, ['spec.workloadSelector.matchLabels: must have at least one label']],
    [
      'missing groupKey',
      { workloadSelector: { matchLabels: { app: 'a' }, pdGroup: { prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } } },
      ['spec.workloadSelector.pdGroup.groupKey: Invalid input: expected string, received undefined'],
    ],
    [
      'pd without prefillLabels',
      { workloadSelector: { matchLabels: { app: 'a' }, pdGroup: { groupKey: 'g', decodeLabels: { r: 'd' } } } },
      ['spec.workloadSelector.pdGroup.prefillLabels: required when pipelineMode is pd'],
    ],
    [
      'pd with encodeLabels',
      { pipelineMode: 'pd-disaggregated', workloadSelector: { matchLabels: { app: 'a' }, pdGroup: epdGroup } },
      ['spec.workloadSelector.pdGroup.encodeLabels: only used when pipelineMode is epd; set pipelineMode: epd or remove it'],
    ],
    [
      'empty groupKey',
      { workloadSelector: { matchLabels: { app: 'a' }, pdGroup: { ...epdGroup, groupKey: '', encodeLabels: undefined } } },
      ['spec.workloadSelector.pdGroup.groupKey: must not be empty'],
    ],
    [
      'aggregated with pdGroup',
      {
        pipelineMode: 'aggregated',
        workloadSelector: { matchLabels: { app: 'a' }, pdGroup: { ...epdGroup, encodeLabels: undefined } },
      },
      ['spec.workloadSelector.pdGroup: must not be set when pipelineMode is aggregated'],
    ],
    [
      'vllm-epd on SGLang',
      {
        inferenceEngine: 'SGLang',
        pipelineMode: 'vllm-epd',
        workloadSelector: { matchLabels: { app: 'a' }, pdGroup: epdGroup },
      },
      ["spec.pipelineMode: 'vllm-epd' needs inferenceEngine vLLM, got SGLang"],
    ],
    [
      'sglang-epd on vLLM',
      { pipelineMode: 'sglang-epd', workloadSelector: { matchLabels: { app: 'a' }, pdGroup: epdGroup } },
      ["spec.pipelineMode: 'sglang-epd' needs inferenceEngine SGLang, got vLLM"],
    ],
    [
      'ambiguous role labels',
      {
        pipelineMode: 'epd',
        workloadSelector: {
          matchLabels: { app: 'a' },
          pdGroup: { groupKey: 'g', encodeLabels: { enc: 'y' }, prefillLabels: { role: 'p' }, decodeLabels: { role: 'd', tier: 'x' } },
        },
      },
      [
        'spec.workloadSelector.pdGroup: ambiguous roles: a pod can match both encodeLabels and prefillLabels; give them a label key with ' +
          'different values',
        'spec.workloadSelector.pdGroup: ambiguous roles: a pod can match both encodeLabels and decodeLabels; give them a label key with ' +
          'different values',
      ],
    ],
    ['bootstrapPort out of range', { bootstrapPort: 0 }, ['spec.bootstrapPort: Too small: expected number to be >=1']],
    [
      'connectionPool.maxConnections 0',
      { connectionPool: { maxConnections: 0 } },
      ['spec.connectionPool.maxConnections: Too small: expected number to be >=1'],
    ],
    [
      'connectionPool.maxConnections not an integer',
      { connectionPool: { maxConnections: 2.5 } },
      ['spec.connectionPool.maxConnections: Invalid input: expected int, received number'],
    ],
  ];
  it.each(cases)('%s', (_name, spec, expected) => {
    expect(problemsOf(server(spec))).toEqual(expected);
  });

  it('accepts an engine secretRef alone, or with passThrough false', () => {
    const secretRef = { name: 'engine-key', key: 'token' };
    expect(problemsOf(server({ engineAuth: { secretRef } }))).toEqual([]);
    expect(problemsOf(server({ engineAuth: { passThrough: false, secretRef } }))).toEqual([]);
  });

  it('reports every problem of one object together', () => {
    const problems = problemsOf(server({ inferenceEngine: 'TGI', workloadPort: { port: 0 }, pipelineMode: 'epd' }));
    expect(problems).toHaveLength(3);
  });

  it('rejects a bad name and a wrong apiVersion', () => {
    expect(problemsOf(server({}, { metadata: { name: 'Bad_Name' } }))).toEqual([
      'metadata.name: must be a lowercase DNS-1123 subdomain (a-z, 0-9, "-" and ".")',
    ]);
    expect(problemsOf(server({}, { apiVersion: 'v1' }))).toEqual(['apiVersion: must be networking.serving.volcano.sh/v1alpha1']);
  });
});

describe('ModelRoute validation errors', () => {
  const target = { modelServerName: 'ms' };
  const cases: [string, Record<string, unknown>, string[]][] = [
    ['no modelName nor lora', { rules: [{ targetModels: [target] }] }, ['spec: modelName or loraAdapters is required']],
    ['empty lora name', { loraAdapters: ['a', ''] }, ['spec.loraAdapters[1]: must not be empty']],
    [
      'too many lora adapters',
      { loraAdapters: Array.from({ length: 11 }, (_, i) => `l${i}`) },
      ['spec.loraAdapters: Too big: expected array to have <=10 items'],
    ],
    [
      'rule without targets',
      { modelName: 'm', rules: [{ targetModels: [] }] },
      ['spec.rules[0].targetModels: Too small: expected array to have >=1 items'],
    ],
    [
      'weight out of range',
      { modelName: 'm', rules: [{ targetModels: [{ ...target, weight: 101 }] }] },
      ['spec.rules[0].targetModels[0].weight: Too big: expected number to be <=100'],
    ],
    [
      'zero weight sum',
      {
        modelName: 'm',
        rules: [
          {
            targetModels: [
              { ...target, weight: 0 },
              { modelServerName: 'b', weight: 0 },
            ],
          },
        ],
      },
      ['spec.rules[0].targetModels: weights must sum to more than 0'],
    ],
    [
      'both target kinds',
      { modelName: 'm', rules: [{ targetModels: [{ modelServerName: 'a', externalModelProviderName: 'b' }] }] },
      ['spec.rules[0].targetModels[0]: exactly one of modelServerName or externalModelProviderName is required'],
    ],
    [
      'neither target kind',
      { modelName: 'm', rules: [{ targetModels: [{ weight: 5 }] }] },
      ['spec.rules[0].targetModels[0]: exactly one of modelServerName or externalModelProviderName is required'],
    ],
    [
      'lora to provider',
      { loraAdapters: ['a'], rules: [{ targetModels: [{ externalModelProviderName: 'openai' }] }] },
      ['spec.rules[0].targetModels[0]: LoRA routes may not target an ExternalModelProvider'],
    ],
    [
      'bad header regex',
      { modelName: 'm', rules: [{ modelMatch: { headers: { 'x-tier': { regex: '(' } } }, targetModels: [target] }] },
      [expect.stringMatching(/^spec\.rules\[0\]\.modelMatch\.headers\["x-tier"\]\.regex: regex does not compile/)],
    ],
    [
      'two match kinds',
      { modelName: 'm', rules: [{ modelMatch: { uri: { exact: '/a', prefix: '/b' } }, targetModels: [target] }] },
      ['spec.rules[0].modelMatch.uri: only one of exact, prefix or regex may be set (got exact, prefix)'],
    ],
    [
      'bad rate limit',
      { modelName: 'm', rateLimit: { inputTokensPerUnit: 0, unit: 'week' } },
      [
        'spec.rateLimit.inputTokensPerUnit: Too small: expected number to be >=1',
        'spec.rateLimit.unit: Invalid option: expected one of "second"|"minute"|"hour"|"day"|"month"',
      ],
    ],
    [
      'bad redis address',
      { modelName: 'm', rateLimit: { inputTokensPerUnit: 5, global: { redis: { address: 'redis' } } } },
      ['spec.rateLimit.global.redis.address: must be host:port'],
    ],
    [
      'too many rules',
      { modelName: 'm', rules: Array.from({ length: 17 }, () => ({ targetModels: [target] })) },
      ['spec.rules: Too big: expected array to have <=16 items'],
    ],
  ];
  it.each(cases)('%s', (_name, spec, expected) => {
    expect(problemsOf(route(spec))).toEqual(expected);
  });
});

describe('documents and kinds', () => {
  it('skips kinds Triad does not read and rejects documents without kind', () => {
    const results = validateManifests('apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n---\nfoo: 1\n---\n# empty\n');
    expect(results.map((r) => [r.status, r.kind, r.line])).toEqual([
      ['skipped', 'Deployment', 1],
      ['invalid', '(no kind)', 5],
    ]);
  });

  it('reports YAML syntax errors with their line', () => {
    const [r] = validateManifests('kind: ModelRoute\nspec: [a, b\n');
    expect(r?.status).toBe('invalid');
    expect(r?.problems[0]?.message).toMatch(/^YAML syntax error at line \d+/);
  });

  it('checks pods', () => {
    expect(
      problemsOf({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {},
      }),
    ).toEqual(['metadata.name: Invalid input: expected string, received undefined']);
  });

  it.each(['127.0.0.999', '::::', '1.2.3', 'engine.local', '10.0.0.1 '])('refuses a pod whose podIP is not an IP literal (%j)', (podIP) => {
    expect(problemsOf({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, status: { phase: 'Running', podIP } })).toEqual([
      'status.podIP: must be an IPv4 or IPv6 address',
    ]);
  });

  it.each(['10.1.2.3', 'fd00::7', ''])('accepts an IPv4 or IPv6 podIP, or none assigned yet (%j)', (podIP) => {
    expect(problemsOf({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, status: { phase: 'Running', podIP } })).toEqual([]);
  });
});

describe('schema round-trips and derived values', () => {
  it('a parsed ModelServer re-parses to the same value, with defaults applied once', () => {
    const first = ModelServerSchema.parse(server({ trafficPolicy: { retry: { attempts: 2 } }, kvConnector: {} }));
    expect(first.spec.workloadPort.protocol).toBe('http');
    expect(first.spec.trafficPolicy?.retry?.retryInterval).toBe('100ms');
    expect(first.spec.kvConnector?.type).toBe('http');
    expect(ModelServerSchema.parse(JSON.parse(JSON.stringify(first)))).toEqual(first);
  });

  it('an ecConnector defaults to shared storage without rewrites, 16 images per encoder request and one re-encode', () => {
    const parsed = ModelServerSchema.parse(server({ ecConnector: {} }));
    expect(parsed.spec.ecConnector).toEqual({ type: 'shared-storage', enableMmEmbeds: false, maxEncoderBatch: 16, reencodeAttempts: 1 });
    expect(ModelServerSchema.parse(JSON.parse(JSON.stringify(parsed)))).toEqual(parsed);
  });

  it('a parsed ModelRoute defaults target weights to 100 and round-trips', () => {
    const first = ModelRouteSchema.parse(route({ modelName: 'm', rules: [{ targetModels: [{ modelServerName: 'a' }] }] }));
    expect(first.spec.rules?.[0]?.targetModels[0]?.weight).toBe(100);
    expect(first.metadata.namespace).toBe('default');
    expect(ModelRouteSchema.parse(JSON.parse(JSON.stringify(first)))).toEqual(first);
  });

  it.each([
    [{}, 'aggregated'],
    [{ pipelineMode: 'pd-disaggregated' }, 'pd'],
    [{ pipelineMode: 'vllm-epd' }, 'epd'],
    [{ pipelineMode: 'sglang-epd' }, 'epd'],
    [{ workloadSelector: { matchLabels: {}, pdGroup: { groupKey: 'g' } } }, 'pd'],
  ])('resolvePipelineMode(%j) = %s', (spec, mode) => {
    expect(resolvePipelineMode({ workloadSelector: { matchLabels: {} }, ...spec } as ModelServer['spec'])).toBe(mode);
  });

  it('role ports fall back to workloadPort.port', () => {
    const spec = { workloadPort: { port: 8000, protocol: 'http' as const, encodePort: 9000 } };
    expect([rolePort(spec, 'encode'), rolePort(spec, 'prefill'), rolePort(spec, 'decode'), rolePort(spec, 'aggregated')]).toEqual([
      9000, 8000, 8000, 8000,
    ]);
  });
});
