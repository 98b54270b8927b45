export { parseGoDuration, DurationSchema } from './duration';
export {
  ObjectMetaSchema,
  ObjectNameSchema,
  NamespaceSchema,
  LabelMapSchema,
  ConditionSchema,
  ResourceStatusSchema,
  MetaConditionSchema,
  isValidLabelKey,
  isValidLabelValue,
} from './meta';
export type { ObjectMeta, Condition } from './meta';
export { makeCondition, keepTransitionTime } from './meta';
export { StringMatchSchema, compileStringMatch } from './string-match';
export type { StringMatch } from './string-match';
export {
  API_GROUP,
  API_VERSION,
  InferenceEngineSchema,
  PipelineModeInputSchema,
  PipelineModeSchema,
  KvConnectorTypeSchema,
  KvConnectorSchema,
  MooncakeImplementationSchema,
  NixlTransferModeSchema,
  PdGroupSchema,
  WorkloadSelectorSchema,
  WorkloadPortSchema,
  RetryPolicySchema,
  TrafficPolicySchema,
  ConnectionPoolSchema,
  ModelServerSpecSchema,
  ModelServerSchema,
  DEFAULT_SGLANG_BOOTSTRAP_PORT,
  DEFAULT_MOONCAKE_BOOTSTRAP_PORT,
  BOOTSTRAP_PORT_ANNOTATION,
  resolvePipelineMode,
  rolePort,
  EcConnectorTypeSchema,
  EcConnectorSchema,
  isPushEcConnector,
  DEFAULT_MAX_ENCODER_BATCH,
  DEFAULT_REENCODE_ATTEMPTS,
  OutlierDetectionSchema,
} from './model-server';
export { DEFAULT_OUTLIER_POLICY, outlierPolicyOf } from './outlier-policy';
export type { OutlierPolicy } from './outlier-policy';
export { shortcutsOf } from './stage-shortcuts';
export type { Shortcuts } from './stage-shortcuts';
export type {
  InferenceEngine,
  PipelineMode,
  KvConnectorType,
  KvConnector,
  MooncakeImplementation,
  NixlTransferMode,
  ModelServerSpec,
  ModelServer,
  EcConnectorType,
  EcConnector,
} from './model-server';
export {
  DP_SIZE_ANNOTATION,
  EC_CONTROL_PORT_ANNOTATION,
  EC_CONTROL_ADDRESSES_ANNOTATION,
  DEFAULT_EC_CONTROL_PORT,
  MAX_DP_SIZE,
  defaultEcControlAddresses,
  ecControlOf,
  normalizeEcAddress,
} from './ec-annotations';
export type { EcControl } from './ec-annotations';
export {
  GATEWAY_API_GROUP,
  ParentReferenceSchema,
  ModelMatchSchema,
  TargetModelSchema,
  RouteRuleSchema,
  RateLimitUnitSchema,
  RateLimitSchema,
  ModelRouteSpecSchema,
  ModelRouteSchema,
  RATE_LIMIT_UNIT_SECONDS,
} from './model-route';
export type { ParentReference, TargetModel, RouteRule, RateLimit, RateLimitUnit, ModelRouteSpec, ModelRoute } from './model-route';
export {
  PROVIDER_SECRET_LABEL_KEY,
  PROVIDER_SECRET_LABEL_VALUE,
  ProviderConditions,
  ProviderReasons,
  RESERVED_PROVIDER_HEADERS,
  ProviderTypeSchema,
  ProviderAuthSchemeSchema,
  SecretKeySelectorSchema,
  ProviderAuthSchema,
  ExternalModelProviderSpecSchema,
  ProviderStatusSchema,
  ExternalModelProviderSchema,
  effectiveAuthScheme,
  authHeaderName,
  isValidHeaderName,
  isValidHeaderValue,
  normalizeCredential,
} from './external-model-provider';
export type {
  ProviderReason,
  ProviderType,
  ProviderAuthScheme,
  ExternalModelProviderSpec,
  ExternalModelProvider,
  CredentialCheck,
} from './external-model-provider';
export { externalModelProviderRules } from './provider-rules';
export {
  GATEWAY_API_VERSION,
  INFERENCE_API_GROUP,
  INFERENCE_POOL_API_VERSION,
  INFERENCE_ENGINE_ANNOTATION,
  LabelSelectorSchema,
  ListenerSchema,
  GatewaySpecSchema,
  GatewaySchema,
  HttpPathMatchSchema,
  HttpRouteMatchSchema,
  HttpUrlRewriteSchema,
  HttpRouteFilterSchema,
  HttpBackendRefSchema,
  HttpRouteRuleSchema,
  HttpRouteSpecSchema,
  HttpRouteSchema,
  InferencePoolSpecSchema,
  InferencePoolSchema,
} from './gateway-api/schemas';
export type {
  LabelSelector,
  Listener,
  Gateway,
  HttpPathMatch,
  HttpUrlRewrite,
  HttpRouteSpec,
  HttpRoute,
  InferencePool,
} from './gateway-api/schemas';
export { matchesLabelSelector } from './gateway-api/label-selector';
export { httpRouteSupport } from './gateway-api/http-route-support';
export type { ServedBackend, ServedRule, UnsupportedFeature, HttpRouteSupport } from './gateway-api/http-route-support';
export { gatewayRules, httpRouteRules, inferencePoolRules } from './gateway-api/rules';
export { PodSchema, isPodReady } from './pod';
export {
  SGLANG_BOOTSTRAP_PORT_ANNOTATION,
  WORKER_PORTS_ANNOTATION,
  ENCODER_BOOTSTRAP_PORT_ANNOTATION,
  DEFAULT_SGLANG_ENCODER_BOOTSTRAP_PORT,
  annotatedPortFor,
  parsePortList,
  staticBootstrapPort,
} from './port-annotations';
export type { AnnotatedPort, BootstrapPortSource } from './port-annotations';
export type { Pod } from './pod';
export { RoleSchema, classifyPod, matchesLabels, overlappingRoleLabels } from './roles';
export type { Role, PodClassification } from './roles';
export { formatPath, formatProblem, parsePath } from './problems';
export { locateField } from './locate';
export type { ValidationProblem } from './problems';
export { modelServerRules, modelRouteRules, durationMs } from './semantic-rules';
export { validateResource, validateManifests, VALIDATED_KINDS } from './validate';
export { crdSchemaWarnings } from './crd-warnings';
export type { TriadResource, ResourceKind, ResourceValidation, DocumentValidation } from './validate';
export { buildCrds, renderCrdFiles } from './crd-generator';
