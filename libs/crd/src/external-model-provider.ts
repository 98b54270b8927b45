import { z } from 'zod';
import { API_VERSION } from './model-server';
import { MetaConditionSchema, ObjectMetaSchema } from './meta';

/** A Secret may hold provider credentials only with this label (Kthena's; the watcher lists Secrets by it). */
export const PROVIDER_SECRET_LABEL_KEY = 'networking.serving.volcano.sh/external-model-provider-credential';
export const PROVIDER_SECRET_LABEL_VALUE = 'true';

/** Status condition types and reasons, as Kthena's router writes them. */
export const ProviderConditions = { ready: 'Ready', credentialsResolved: 'CredentialsResolved' } as const;
export const ProviderReasons = {
  ready: 'Ready',
  configurationInvalid: 'ConfigurationInvalid',
  credentialNotRequired: 'CredentialNotRequired',
  credentialResolved: 'CredentialResolved',
  credentialNotFound: 'CredentialNotFound',
  credentialKeyNotFound: 'CredentialKeyNotFound',
  credentialInvalid: 'CredentialInvalid',
} as const;
export type ProviderReason = (typeof ProviderReasons)[keyof typeof ProviderReasons];

/**
 * Static headers that could override credentials, routing or hop-by-hop behaviour (Kthena's list): a provider
 * may not set them.
 */
export const RESERVED_PROVIDER_HEADERS: readonly string[] = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'x-api-key',
  'host',
  'content-length',
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'trailer',
  'te',
];

export const ProviderTypeSchema = z.enum(['OpenAI', 'Anthropic']);
export type ProviderType = z.infer<typeof ProviderTypeSchema>;
export const ProviderAuthSchemeSchema = z.enum(['Bearer', 'APIKey']);
export type ProviderAuthScheme = z.infer<typeof ProviderAuthSchemeSchema>;

/** `corev1.SecretKeySelector`; `name` defaults to "" as in Kubernetes (a semantic rule requires it). */
export const SecretKeySelectorSchema = z.object({
  key: z.string(),
  name: z.string().default(''),
  optional: z.boolean().optional(),
});

export const ProviderAuthSchema = z.object({
  scheme: ProviderAuthSchemeSchema.optional().meta({ description: 'Defaults to Bearer for OpenAI, APIKey (x-api-key) for Anthropic' }),
  secretRef: SecretKeySelectorSchema,
});

export const ExternalModelProviderSpecSchema = z.object({
  providerType: ProviderTypeSchema.default('OpenAI'),
  model: z.string().max(256).optional().meta({ description: 'Upstream model name; overwrites the request model when set' }),
  baseURL: z
    .string()
    .min(1)
    .regex(/^https:\/\/.+/, 'must start with https://')
    .meta({ description: 'Provider endpoint root, https only' }),
  insecureSkipVerify: z.boolean().default(false),
  auth: ProviderAuthSchema.optional(),
  headers: z.record(z.string(), z.string()).optional().meta({ description: 'Non-secret static headers added upstream' }),
});
export type ExternalModelProviderSpec = z.infer<typeof ExternalModelProviderSpecSchema>;

/** Status as Kthena writes it: `observedGeneration` and the Ready / CredentialsResolved conditions. */
export const ProviderStatusSchema = z.object({
  observedGeneration: z.number().int().optional(),
  conditions: z.array(z.looseObject({ type: z.string(), status: z.string() })).optional(),
});
/** The same status with metav1.Condition's constraints, for the generated CRD. */
export const ProviderCrdStatusSchema = z.object({
  observedGeneration: z.number().int().optional(),
  conditions: z.array(MetaConditionSchema).optional(),
});

export const ExternalModelProviderSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('ExternalModelProvider'),
  metadata: ObjectMetaSchema,
  spec: ExternalModelProviderSpecSchema,
  status: ProviderStatusSchema.optional(),
});
export type ExternalModelProvider = z.infer<typeof ExternalModelProviderSchema>;

/** The auth scheme in force: the spec's, else the provider type's default. */
export function effectiveAuthScheme(spec: Pick<ExternalModelProviderSpec, 'providerType' | 'auth'>): ProviderAuthScheme {
  return spec.auth?.scheme ?? (spec.providerType === 'Anthropic' ? 'APIKey' : 'Bearer');
}

/** Header that carries the credential: `authorization: Bearer <token>` or `x-api-key: <token>`. */
export function authHeaderName(scheme: ProviderAuthScheme): 'authorization' | 'x-api-key' {
  return scheme === 'Bearer' ? 'authorization' : 'x-api-key';
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Field values may hold visible ASCII, spaces, tabs and obs-text, never other control characters (RFC 9110).
// eslint-disable-next-line no-control-regex -- finding control characters is this pattern's job
const BAD_VALUE_CHAR = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/** RFC 9110 field-name syntax. */
export function isValidHeaderName(name: string): boolean {
  return TOKEN.test(name);
}

/** Whether a header value may be sent as is (no CR, LF or other control characters). */
export function isValidHeaderValue(value: string): boolean {
  return !BAD_VALUE_CHAR.test(value);
}

/** Result of reading a credential out of a Secret value; `message` never contains the value. */
export type CredentialCheck = { ok: true; token: string } | { ok: false; reason: ProviderReason; message: string };

/**
 * Trims the surrounding whitespace Secret tooling tends to add and checks that the rest can go in a header, as
 * Kthena does, so status and request construction agree on whether a credential is usable.
 */
export function normalizeCredential(value: string | undefined): CredentialCheck {
  if (value === undefined || value.length === 0) {
    return { ok: false, reason: ProviderReasons.credentialKeyNotFound, message: 'Credential Secret key is not found' };
  }
  const token = value.trim();
  if (token === '')
    return { ok: false, reason: ProviderReasons.credentialInvalid, message: 'provider credential is empty after trimming whitespace' };
  if (!isValidHeaderValue(token)) {
    return { ok: false, reason: ProviderReasons.credentialInvalid, message: 'provider credential contains invalid HTTP header characters' };
  }
  return { ok: true, token };
}
