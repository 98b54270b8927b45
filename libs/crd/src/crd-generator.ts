import { z } from 'zod';
import { stringify } from 'yaml';
import { CRD_OPTIONAL, CRD_REQUIRED } from './crd-markers';
import { ExternalModelProviderSpecSchema, ProviderCrdStatusSchema } from './external-model-provider';
import { API_GROUP, ModelServerSpecSchema } from './model-server';
import { ModelRouteSpecSchema } from './model-route';
import { MetaConditionSchema } from './meta';

const CRD_HEADER = '# GENERATED from the zod schemas in libs/crd by `npx triad crds`. Do not edit.\n';

type JsonSchema = Record<string, unknown>;

/**
 * Turns zod's OpenAPI 3.0 output into a Kubernetes structural schema: no `$schema`, no `propertyNames`, no
 * `additionalProperties: false` (the API server prunes unknown fields itself), `const` as a one-value enum, no
 * meaningless int maximum, and fields marked {@link CRD_REQUIRED} listed in their object's `required`.
 */
function toStructural(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(toStructural);
  if (!node || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node as JsonSchema)) {
    if (key === '$schema' || key === 'propertyNames' || key === CRD_REQUIRED || key === CRD_OPTIONAL) continue;
    // zod writes a RegExp's source, where `/` is escaped; the API server's RE2 reads `\/` and `/` alike.
    if (key === 'pattern' && typeof value === 'string') {
      out[key] = value.replace(/\\\//g, '/');
      continue;
    }
    if (key === 'additionalProperties' && value === false) continue;
    if (key === 'maximum' && value === Number.MAX_SAFE_INTEGER) continue;
    if (key === 'minimum' && value === Number.MIN_SAFE_INTEGER) continue;
    if (key === 'const') {
      out['enum'] = [value];
      continue;
    }
    out[key] = toStructural(value);
  }
  const props = Object.entries(((node as JsonSchema)['properties'] as Record<string, JsonSchema> | undefined) ?? {});
  const add = props.filter(([, p]) => p[CRD_REQUIRED] === true).map(([k]) => k);
  const drop = new Set(props.filter(([, p]) => p[CRD_OPTIONAL] === true).map(([k]) => k));
  if (add.length > 0 || drop.size > 0) {
    const required = [...((out['required'] as string[] | undefined) ?? []), ...add].filter((k) => !drop.has(k));
    // Keep the `required` key after `properties`, where zod puts it.
    delete out['required'];
    if (required.length > 0) out['required'] = required;
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
  status: JsonSchema;
  /** Top-level `required`: Kthena's ModelRoute requires `spec`; its ModelServer and ExternalModelProvider do not. */
  required: string[];
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
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.kind.toLowerCase(),
        shortNames: def.shortNames,
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
                status: def.status,
              },
              ...(def.required.length > 0 ? { required: def.required } : {}),
            },
          },
        },
      ],
    },
  };
}

/** Status of ModelServer and ModelRoute: Triad's `Accepted` condition (Kthena's CRDs declare an empty status). */
const conditionsStatus = (): JsonSchema => schemaOf(z.object({ conditions: z.array(MetaConditionSchema).optional() }));

function modelServerSpec(): JsonSchema {
  const spec = schemaOf(ModelServerSpecSchema);
  spec['x-kubernetes-validations'] = [
    {
      rule:
        "!has(self.pipelineMode) || !(self.pipelineMode in ['epd', 'vllm-epd', 'sglang-epd']) || (has(self.workloadSelector.pdGroup) " +
        '&& has(self.workloadSelector.pdGroup.encodeLabels) && has(self.workloadSelector.pdGroup.decodeLabels))',
      message: 'pipelineMode epd needs workloadSelector.pdGroup with encodeLabels and decodeLabels',
    },
  ];
  const engineAuth = (spec['properties'] as Record<string, JsonSchema>)['engineAuth'];
  engineAuth['x-kubernetes-validations'] = [
    {
      rule: '!has(self.secretRef) || (!has(self.credential) && !(has(self.passThrough) && self.passThrough))',
      message: 'secretRef is not used together with credential or passThrough: choose one source of Authorization',
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
  props['modelName']['x-kubernetes-validations'] = [{ rule: 'self == oldSelf', message: 'modelName is immutable' }];
  const rules = props['rules'];
  const targets = ((rules['items'] as JsonSchema)['properties'] as Record<string, JsonSchema>)['targetModels'];
  (targets['items'] as JsonSchema)['x-kubernetes-validations'] = [
    {
      rule: "(has(self.modelServerName) && self.modelServerName != '') != (has(self.externalModelProviderName) && self.externalModelProviderName != '')",
      message: 'exactly one of modelServerName or externalModelProviderName must be set',
    },
  ];
  return spec;
}

function providerSpec(): JsonSchema {
  const spec = schemaOf(ExternalModelProviderSpecSchema);
  const auth = (spec['properties'] as Record<string, JsonSchema>)['auth'];
  auth['x-kubernetes-validations'] = [
    { rule: '!has(self.secretRef.optional) || !self.secretRef.optional', message: 'secretRef.optional must be false or unset' },
  ];
  // A SecretKeySelector is replaced as a whole by server-side apply, as in Kubernetes' own types.
  (auth['properties'] as Record<string, JsonSchema>)['secretRef']['x-kubernetes-map-type'] = 'atomic';
  return spec;
}

/** The CustomResourceDefinitions of ModelServer, ModelRoute and ExternalModelProvider, from the zod schemas. */
export function buildCrds(): JsonSchema[] {
  return [
    crd({
      kind: 'ModelServer',
      plural: 'modelservers',
      shortNames: ['ms'],
      spec: modelServerSpec(),
      status: conditionsStatus(),
      required: [],
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
      status: conditionsStatus(),
      required: ['spec'],
      columns: [
        { name: 'Model', type: 'string', jsonPath: '.spec.modelName' },
        { name: 'Accepted', type: 'string', jsonPath: ".status.conditions[?(@.type=='Accepted')].status" },
      ],
    }),
    crd({
      kind: 'ExternalModelProvider',
      plural: 'externalmodelproviders',
      shortNames: ['emp'],
      spec: providerSpec(),
      status: schemaOf(ProviderCrdStatusSchema),
      required: [],
      columns: [
        { name: 'Type', type: 'string', jsonPath: '.spec.providerType' },
        { name: 'BaseURL', type: 'string', jsonPath: '.spec.baseURL' },
        { name: 'Ready', type: 'string', jsonPath: ".status.conditions[?(@.type=='Ready')].status" },
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
