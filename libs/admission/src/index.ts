// Admission control for the gateway: authentication (API keys, JWT), token rate limits shared across replicas
// (NATS KV or Redis, with local leases), input token estimates, and Kthena-style user-fairness queueing.
export { createAdmission } from './admission';
export type { Admission } from './admission';
export { createAdmissionHooks } from './admission-hooks';
export type { AdmissionHookOptions } from './admission-hooks';
export type { AdmissionConfigInput } from './config/admission-config';
export { generateApiKey, hashApiKey } from './auth/api-key-hash';
export type { Identity } from './identity';
