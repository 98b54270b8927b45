export { parseGoDuration, DurationSchema } from './duration';
export {
  ObjectMetaSchema, ObjectNameSchema, NamespaceSchema, LabelMapSchema, ConditionSchema, ResourceStatusSchema,
  isValidLabelKey, isValidLabelValue,
} from './meta';
export type { ObjectMeta, Condition } from './meta';
export { StringMatchSchema, compileStringMatch } from './string-match';
export type { StringMatch } from './string-match';
export {
  API_GROUP, API_VERSION, InferenceEngineSchema, PipelineModeInputSchema, PipelineModeSchema, KvConnectorTypeSchema,
  PdGroupSchema, WorkloadSelectorSchema, WorkloadPortSchema, RetryPolicySchema, TrafficPolicySchema,
  ModelServerSpecSchema, ModelServerSchema, DEFAULT_SGLANG_BOOTSTRAP_PORT, BOOTSTRAP_PORT_ANNOTATION,
  resolvePipelineMode, rolePort,
} from './model-server';
export type { InferenceEngine, PipelineMode, KvConnectorType, ModelServerSpec, ModelServer } from './model-server';
export {
  ParentReferenceSchema, ModelMatchSchema, TargetModelSchema, RouteRuleSchema, RateLimitUnitSchema, RateLimitSchema,
  ModelRouteSpecSchema, ModelRouteSchema, RATE_LIMIT_UNIT_SECONDS,
} from './model-route';
export type { TargetModel, RouteRule, RateLimit, RateLimitUnit, ModelRouteSpec, ModelRoute } from './model-route';
export { PodSchema, isPodReady } from './pod';
export {
  SGLANG_BOOTSTRAP_PORT_ANNOTATION, WORKER_PORTS_ANNOTATION, ENCODER_BOOTSTRAP_PORT_ANNOTATION, DEFAULT_SGLANG_ENCODER_BOOTSTRAP_PORT,
  annotatedPortFor, parsePortList, staticBootstrapPort,
} from './port-annotations';
export type { AnnotatedPort, BootstrapPortSource } from './port-annotations';
export type { Pod } from './pod';
export { RoleSchema, classifyPod, matchesLabels, overlappingRoleLabels } from './roles';
export type { Role, PodClassification } from './roles';
export { formatPath, formatProblem } from './problems';
export type { ValidationProblem } from './problems';
export { modelServerRules, modelRouteRules, durationMs } from './semantic-rules';
export { validateResource, validateManifests } from './validate';
export type { TriadResource, ResourceKind, ResourceValidation, DocumentValidation } from './validate';
export { buildCrds, renderCrdFiles } from './crd-generator';
