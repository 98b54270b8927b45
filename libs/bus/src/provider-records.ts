import { z } from 'zod';
import { ExternalModelProviderSpecSchema, ProviderAuthSchemeSchema } from '@triad/crd';
import { SealedCredentialSchema } from './credentials';
import { SCHEMA_VERSION } from './records';

const SchemaVersion = z.literal(SCHEMA_VERSION);

/**
 * A validated ExternalModelProvider and whether it can be used. Key: `objectKey(namespace, name)` in
 * `triad_v1_externalproviders`. It never holds the credential: that is a separate, sealed record.
 */
export const ExternalProviderRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  name: z.string(),
  /** The last valid spec (defaults applied: providerType, insecureSkipVerify). */
  spec: ExternalModelProviderSpecSchema,
  /** Present when the provider authenticates: the scheme in force and the header it goes in. */
  auth: z
    .object({
      scheme: ProviderAuthSchemeSchema,
      /** `authorization` (value `Bearer <token>`) or `x-api-key` (value `<token>`). */
      header: z.enum(['authorization', 'x-api-key']),
    })
    .optional(),
  /** The Ready condition: true when the credential (if any) is resolved and its sealed record published. */
  ready: z.boolean(),
  /** Kthena's reason (`Ready`, `CredentialNotFound`, `CredentialKeyNotFound`, `CredentialInvalid`...). */
  reason: z.string(),
  message: z.string(),
  creationTimestamp: z.string().optional(),
});
export type ExternalProviderRecord = z.infer<typeof ExternalProviderRecordSchema>;

/**
 * One provider's credential, sealed. Key: `objectKey(namespace, provider)` in `triad_v1_provider_credentials`
 * (the same key as its provider record, and the AAD of the seal). Written only while the credential resolves;
 * deleted when the Secret, its key or the provider goes away.
 */
export const ProviderCredentialRecordSchema = z.object({
  schemaVersion: SchemaVersion,
  namespace: z.string(),
  provider: z.string(),
  scheme: ProviderAuthSchemeSchema,
  header: z.enum(['authorization', 'x-api-key']),
  sealed: SealedCredentialSchema,
});
export type ProviderCredentialRecord = z.infer<typeof ProviderCredentialRecordSchema>;
