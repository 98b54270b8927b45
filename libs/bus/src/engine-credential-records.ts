import { z } from 'zod';
import { SealedCredentialSchema } from './credentials';
import { SCHEMA_VERSION } from './records';

/**
 * Where a ModelServer's engine credential (`spec.engineAuth.secretRef`) stands, and the value sealed when it
 * resolves. Key: `objectKey(namespace, server)` in `triad_v1_engine_credentials`, written for every ModelServer
 * with a secretRef: the gateway tells a Secret that is missing (and why) from one not published yet.
 */
export const EngineCredentialRecordSchema = z.object({
  schemaVersion: z.literal(SCHEMA_VERSION),
  namespace: z.string(),
  /** The ModelServer. */
  server: z.string(),
  /** The Secret key it names (in its own namespace). */
  secretRef: z.object({ name: z.string(), key: z.string() }),
  /** True when the Secret's key holds a usable value and `sealed` carries it. */
  resolved: z.boolean(),
  /** `CredentialResolved`, `CredentialNotFound`, `CredentialKeyNotFound`, `CredentialInvalid`, `CredentialNotDistributable`. */
  reason: z.string(),
  /** Why, for the status condition and the gateway's error; never contains the value. */
  message: z.string(),
  /** The value, sealed for the AAD {@link engineCredentialAad} of this key; present only when `resolved`. */
  sealed: SealedCredentialSchema.optional(),
});
export type EngineCredentialRecord = z.infer<typeof EngineCredentialRecordSchema>;

/**
 * The additional authenticated data an engine credential is sealed for: its KV key with a prefix of its own, so a
 * sealed provider credential copied into this bucket under the same `ns.name` does not open as an engine's.
 */
export function engineCredentialAad(key: string): string {
  return `engine:${key}`;
}
