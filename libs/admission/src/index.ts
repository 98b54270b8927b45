// Admission control for the gateway: authentication (API keys, JWT), token rate limits shared across replicas
// (NATS KV or Redis, with local leases), input token estimates, and Kthena-style user-fairness queueing.
export { createAdmission } from './admission';
export type { Admission, AdmissionDeps, AdmitRequest, Admitted, Rejected, Usage, ReloadResult } from './admission';
export { createAdmissionHooks } from './admission-hooks';
export type { AdmissionHookOptions } from './admission-hooks';
export { AdmissionConfigSchema, TokenizerConfigSchema } from './config/admission-config';
export type {
  AdmissionConfig,
  AdmissionConfigInput,
  AuthConfig,
  RateLimitConfig,
  FairnessConfig,
  TokenLimit,
} from './config/admission-config';
export { withKthenaEnv } from './config/kthena-env';
export type { RequestHeaders, AuthOutcome } from './auth/authenticator';
export { ApiKeyFileSchema, ApiKeyEntrySchema } from './auth/api-key-file';
export type { ApiKeyEntry } from './auth/api-key-file';
export { generateApiKey, hashApiKey, apiKeyId } from './auth/api-key-hash';
export type { ScryptParams } from './auth/api-key-hash';
export { ANONYMOUS, compileModelMatcher, mayUseModel } from './identity';
export type { Identity, ModelMatcher } from './identity';
export { Rejections, retryAfterSeconds } from './rejection';
export type { AdmissionRejection } from './rejection';
export { TokenEstimator, tiktokenEncodingFor } from './tokens/token-estimator';
export type { TokenEstimate, EstimateMethod } from './tokens/token-estimator';
export type { SpanLike } from './fairness/fair-queue';
export { MemoryBudgetStore, StoreUnavailableError } from './ratelimit/budget-store';
export type { BudgetStore } from './ratelimit/budget-store';
export { createAdmissionMetrics } from './metrics';
export type { AdmissionMetrics } from './metrics';
export type { AdmissionLogger } from './logger';
