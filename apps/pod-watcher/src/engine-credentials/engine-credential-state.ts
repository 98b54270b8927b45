import {
  PROVIDER_SECRET_LABEL_KEY,
  PROVIDER_SECRET_LABEL_VALUE,
  ProviderReasons,
  makeCondition,
  normalizeCredential,
  type Condition,
  type EngineSecretRef,
} from '@triad/crd';
import type { StoredSecret } from '../inventory/secret-store';
import { CREDENTIAL_NOT_DISTRIBUTABLE } from '../providers/provider-state';

/** The ModelServer condition the watcher writes for `spec.engineAuth.secretRef` (Triad's, beside `Accepted`). */
export const ENGINE_CREDENTIAL_CONDITION = 'EngineCredentialResolved';

/** How a ModelServer's secretRef stands: the token to seal when it resolves; never logged. */
export type EngineCredentialOutcome =
  | { readonly resolved: true; readonly reason: string; readonly message: string; readonly token: string }
  | { readonly resolved: false; readonly reason: string; readonly message: string };

/**
 * Resolves a ModelServer's engine credential as providers' are (the same labelled Secrets, the same reasons):
 * the Secret of the server's namespace, its key, a value that can go in a header once trimmed, and a credentials
 * key to seal it with. Messages name the Secret and key, never the value.
 */
export function resolveEngineCredential(
  namespace: string,
  ref: EngineSecretRef,
  secret: (namespace: string, name: string) => StoredSecret | undefined,
  canSeal: boolean,
): EngineCredentialOutcome {
  const stored = secret(namespace, ref.name);
  if (!stored) {
    return {
      resolved: false,
      reason: ProviderReasons.credentialNotFound,
      message:
        `Secret ${namespace}/${ref.name} is not found or does not have label ` +
        `${PROVIDER_SECRET_LABEL_KEY}=${PROVIDER_SECRET_LABEL_VALUE}`,
    };
  }
  // The same checks as a provider's credential (trimmed; a value that cannot go in a header is refused).
  const checked = normalizeCredential(stored.data[ref.key]);
  if (!checked.ok) {
    const what =
      checked.reason === ProviderReasons.credentialKeyNotFound
        ? 'is missing or empty'
        : checked.message.replace(/^provider credential /, '');
    return { resolved: false, reason: checked.reason, message: `key ${ref.key} of Secret ${namespace}/${ref.name} ${what}` };
  }
  if (!canSeal) {
    return {
      resolved: false,
      reason: CREDENTIAL_NOT_DISTRIBUTABLE,
      message:
        'the pod-watcher has no credentials key (TRIAD_CREDENTIALS_KEY or --credentials-key-file), so the gateway cannot ' +
        'receive this credential',
    };
  }
  return {
    resolved: true,
    reason: ProviderReasons.credentialResolved,
    message: `key ${ref.key} of Secret ${namespace}/${ref.name} is in use`,
    token: checked.token,
  };
}

/** The ModelServer's `EngineCredentialResolved` condition for an outcome. */
export function engineCredentialCondition(outcome: EngineCredentialOutcome, generation: number | undefined, now: Date): Condition {
  return makeCondition(ENGINE_CREDENTIAL_CONDITION, outcome.resolved, outcome.reason, outcome.message, generation, now);
}
