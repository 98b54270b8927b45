export { parseGoDuration, DurationSchema } from './duration';
export { ObjectMetaSchema } from './meta';
export type { Condition } from './meta';
export { makeCondition, keepTransitionTime } from './meta';
export { compileStringMatch } from './string-match';
export {
  API_GROUP,
  API_VERSION,
  InferenceEngineSchema,
  PipelineModeSchema,
  ModelServerSpecSchema,
  ModelServerSchema,
  EngineSecretRefSchema,
  DEFAULT_SGLANG_BOOTSTRAP_PORT,
  DEFAULT_MOONCAKE_BOOTSTRAP_PORT,
  resolvePipelineMode,
  rolePort,
  isPushEcConnector,
  DEFAULT_MAX_ENCODER_BATCH,
  DEFAULT_REENCODE_ATTEMPTS,
} from './model-server';
export { streamResumePolicyOf } from './stream-resume-policy';
export type { StreamResumePolicy } from './stream-resume-policy';
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
  EngineSecretRef,
} from './model-server';
export { EC_CONTROL_PORT_ANNOTATION, defaultEcControlAddresses, ecControlOf } from './ec-annotations';
export { GATEWAY_API_GROUP, RateLimitUnitSchema, ModelRouteSpecSchema, ModelRouteSchema, RATE_LIMIT_UNIT_SECONDS } from './model-route';
export type { ParentReference, RouteRule, RateLimit, ModelRouteSpec, ModelRoute } from './model-route';
export {
  PROVIDER_SECRET_LABEL_KEY,
  PROVIDER_SECRET_LABEL_VALUE,
  ProviderConditions,
  ProviderReasons,
  ProviderAuthSchemeSchema,
  ExternalModelProviderSpecSchema,
  ExternalModelProviderSchema,
  effectiveAuthScheme,
  authHeaderName,
  normalizeCredential,
} from './external-model-provider';
export type { ProviderAuthScheme, ExternalModelProviderSpec, ExternalModelProvider } from './external-model-provider';
export {
  INFERENCE_ENGINE_ANNOTATION,
  GatewaySchema,
  HttpPathMatchSchema,
  HttpUrlRewriteSchema,
  HttpRouteSchema,
  InferencePoolSchema,
} from './gateway-api/schemas';
export type { Listener, Gateway, HttpRoute, InferencePool } from './gateway-api/schemas';
export { matchesLabelSelector } from './gateway-api/label-selector';
export { httpRouteSupport } from './gateway-api/http-route-support';
export { PodSchema, isPodReady } from './pod';
export {
  ENCODER_BOOTSTRAP_PORT_ANNOTATION,
  DEFAULT_SGLANG_ENCODER_BOOTSTRAP_PORT,
  annotatedPortFor,
  staticBootstrapPort,
} from './port-annotations';
export type { BootstrapPortSource } from './port-annotations';
export type { Pod } from './pod';
export { RoleSchema, classifyPod } from './roles';
export type { Role } from './roles';
export { formatPath, formatProblem } from './problems';
export type { ValidationProblem } from './problems';
export { durationMs } from './semantic-rules';
export { validateResource, validateManifests } from './validate';
export { renderCrdFiles } from './crd-generator';
