import { z } from 'zod';
import { stringify } from 'yaml';
import { API_GROUP, ModelServerSpecSchema } from './model-server';
import { ModelRouteSpecSchema } from './model-route';
import { ResourceStatusSchema } from './meta';

const CRD_HEADER = '# GENERATED from the zod schemas in libs/crd by `npx triad crds`. Do not edit.\n';

type JsonSchema = Record<string, unknown>;

/**
 * Turns zod's OpenAPI 3.0 output into a Kubernetes structural schema: no `$schema`, no `propertyNames`, no
 * `additionalProperties: false` (the API server prunes unknown fields itself), `const` as a one-value enum,
 * and no meaningless int maximum.
 */
function toStructural(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(toStructural);
  if (!node || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node as JsonSchema)) {
    if (key === '$schema' || key === 'propertyNames') continue;
    if (key === 'additionalProperties' && value === false) continue;
    if (key === 'maximum' && value === Number.MAX_SAFE_INTEGER) continue;
    if (key === 'minimum' && value === Number.MIN_SAFE_INTEGER) continue;
    if (key === 'const') {
      out['enum'] = [value];
      continue;
    }
    out[key] = toStructural(value);
  }
  return out;
}

function schemaOf(schema: z.ZodType): JsonSchema {
  return toStructural(z.toJSONSchema(schema, { io: 'input', target: 'openapi-3.0', unrepresentable: 'any' })) as JsonSchema;
}

interface CrdSpec {
  kind: string;
  plural: string;
  shortNames: string[];
  spec: JsonSchema;
  columns: { name: string; type: string; jsonPath: string }[];
}

function crd(def: CrdSpec): JsonSchema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${def.plural}.${API_GROUP}` },
    spec: {
      group: API_GROUP,
      names: {
        kind: def.kind, listKind: `${def.kind}List`, plural: def.plural, singular: def.kind.toLowerCase(), shortNames: def.shortNames,
      },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [...def.columns, { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: def.spec,
                status: schemaOf(ResourceStatusSchema),
              },
              required: ['spec'],
            },
          },
        },
      ],
    },
  };
}

function modelServerSpec(): JsonSchema {
  const spec = schemaOf(ModelServerSpecSchema);
  spec['x-kubernetes-validations'] = [
    {
      rule: "!has(self.pipelineMode) || !(self.pipelineMode in ['epd', 'vllm-epd', 'sglang-epd']) || (has(self.workloadSelector.pdGroup) " +
        "&& has(self.workloadSelector.pdGroup.encodeLabels) && has(self.workloadSelector.pdGroup.decodeLabels))",
      message: 'pipelineMode epd needs workloadSelector.pdGroup with encodeLabels and decodeLabels',
    },
  ];
  return spec;
}

function modelRouteSpec(): JsonSchema {
  const spec = schemaOf(ModelRouteSpecSchema);
  spec['x-kubernetes-validations'] = [
    {
      rule: "(has(self.modelName) && self.modelName != '') || (has(self.loraAdapters) && size(self.loraAdapters) > 0)",
      message: 'modelName or loraAdapters is required',
    },
  ];
  const props = spec['properties'] as Record<string, JsonSchema>;
  (props['modelName'] as JsonSchema)['x-kubernetes-validations'] = [{ rule: 'self == oldSelf', message: 'modelName is immutable' }];
  const rules = props['rules'] as JsonSchema;
  const targets = ((rules['items'] as JsonSchema)['properties'] as Record<string, JsonSchema>)['targetModels'] as JsonSchema;
  (targets['items'] as JsonSchema)['x-kubernetes-validations'] = [
    {
      rule: 'has(self.modelServerName) != has(self.externalModelProviderName)',
      message: 'exactly one of modelServerName or externalModelProviderName is required',
    },
  ];
  return spec;
}

/** The CustomResourceDefinition objects for ModelServer and ModelRoute, derived from the zod schemas. */
export function buildCrds(): JsonSchema[] {
  return [
    crd({
      kind: 'ModelServer',
      plural: 'modelservers',
      shortNames: ['ms'],
      spec: modelServerSpec(),
      columns: [
        { name: 'Model', type: 'string', jsonPath: '.spec.model' },
        { name: 'Engine', type: 'string', jsonPath: '.spec.inferenceEngine' },
        { name: 'Mode', type: 'string', jsonPath: '.spec.pipelineMode' },
        { name: 'Accepted', type: 'string', jsonPath: ".status.conditions[?(@.type=='Accepted')].status" },
      ],
    }),
    crd({
      kind: 'ModelRoute',
      plural: 'modelroutes',
      shortNames: ['mr'],
      spec: modelRouteSpec(),
      columns: [
        { name: 'Model', type: 'string', jsonPath: '.spec.modelName' },
        { name: 'Accepted', type: 'string', jsonPath: ".status.conditions[?(@.type=='Accepted')].status" },
      ],
    }),
  ];
}

/** File name → YAML text for `infra/crds/`, exactly what `triad crds` writes and the staleness test compares. */
export function renderCrdFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const def of buildCrds()) {
    const name = (def['metadata'] as { name: string }).name;
    files[`${API_GROUP}_${name.split('.')[0]}.yaml`] = CRD_HEADER + stringify(def, { lineWidth: 0 });
  }
  return files;
}
