import { SCHEMA_VERSION, type ExternalProviderRecord } from '@triad/bus';
import {
  PROVIDER_SECRET_LABEL_KEY,
  PROVIDER_SECRET_LABEL_VALUE,
  ProviderConditions,
  ProviderReasons,
  authHeaderName,
  effectiveAuthScheme,
  formatProblem,
  makeCondition,
  normalizeCredential,
  type Condition,
  type ExternalModelProvider,
  type ProviderAuthScheme,
  type ValidationProblem,
} from '@triad/crd';
import type { StoredSecret } from '../inventory/secret-store';

/** Triad's one reason beyond Kthena's: the credential resolves, but the watcher has no key to seal it with. */
export const CREDENTIAL_NOT_DISTRIBUTABLE = 'CredentialNotDistributable';

const notDistributable =
  'the pod-watcher has no credentials key (TRIAD_CREDENTIALS_KEY or --credentials-key-file), ' +
  'so the gateway cannot receive this credential';

/** A resolved credential, to be sealed for the gateway. Never logged. */
export interface ResolvedCredential {
  readonly scheme: ProviderAuthScheme;
  readonly header: 'authorization' | 'x-api-key';
  readonly token: string;
}

/** What one ExternalModelProvider comes to: its record, its credential, its status. */
export interface ProviderOutcome {
  /** Present while a valid version is in force. */
  readonly record?: ExternalProviderRecord;
  /** Present when the record's credential resolves and can be sealed. */
  readonly credential?: ResolvedCredential;
  /** `CredentialsResolved` then `Ready`, for the latest version. */
  readonly conditions: readonly Condition[];
}

export interface ProviderInput {
  readonly namespace: string;
  readonly name: string;
  /** The last valid version, if any. */
  readonly valid?: ExternalModelProvider;
  /** Problems of the latest version when it is invalid. */
  readonly problems?: readonly ValidationProblem[];
  /** Generation of the latest version (for the conditions' observedGeneration). */
  readonly generation?: number;
  readonly secret: (namespace: string, name: string) => StoredSecret | undefined;
  /** False when the watcher has no credentials key: a credential cannot reach the gateway. */
  readonly canSeal: boolean;
  readonly now: Date;
}

type CredentialState =
  { ok: true; reason: string; message: string; credential?: ResolvedCredential } | { ok: false; reason: string; message: string };

/** Kthena's credential resolution: the labelled Secret, its key, a value that can go in a header. */
function resolveCredential(provider: ExternalModelProvider, secret: ProviderInput['secret']): CredentialState {
  const auth = provider.spec.auth;
  if (!auth) return { ok: true, reason: ProviderReasons.credentialNotRequired, message: 'No credential is configured' };
  const stored = secret(provider.metadata.namespace, auth.secretRef.name);
  if (!stored) {
    return {
      ok: false,
      reason: ProviderReasons.credentialNotFound,
      message: `Credential Secret is not found or does not have label ${PROVIDER_SECRET_LABEL_KEY}=${PROVIDER_SECRET_LABEL_VALUE}`,
    };
  }
  const checked = normalizeCredential(stored.data[auth.secretRef.key]);
  if (!checked.ok) return { ok: false, reason: checked.reason, message: checked.message };
  const scheme = effectiveAuthScheme(provider.spec);
  return {
    ok: true,
    reason: ProviderReasons.credentialResolved,
    message: 'Credential Secret and key are available',
    credential: { scheme, header: authHeaderName(scheme), token: checked.token },
  };
}

/**
 * Decides an ExternalModelProvider as Kthena's controller does (Ready and CredentialsResolved with its reasons),
 * for Triad's "last valid version stays in force": the record carries the last valid spec and whether it can be
 * used; the conditions describe the latest version (ConfigurationInvalid with every problem when it is invalid).
 */
export function decideProvider(input: ProviderInput): ProviderOutcome {
  const { valid, generation, now } = input;
  const cred = valid ? resolveCredential(valid, input.secret) : undefined;
  const sealable = !cred?.ok || !cred.credential || input.canSeal;
  let record: ExternalProviderRecord | undefined;
  if (valid && cred) {
    const ready = cred.ok && sealable;
    const auth = valid.spec.auth
      ? { scheme: effectiveAuthScheme(valid.spec), header: authHeaderName(effectiveAuthScheme(valid.spec)) }
      : undefined;
    record = {
      schemaVersion: SCHEMA_VERSION,
      namespace: input.namespace,
      name: input.name,
      spec: valid.spec,
      ...(auth ? { auth } : {}),
      ready,
      reason: !cred.ok ? cred.reason : !sealable ? CREDENTIAL_NOT_DISTRIBUTABLE : ProviderReasons.ready,
      message: !cred.ok ? cred.message : !sealable ? notDistributable : 'External provider configuration is ready',
      ...(valid.metadata.creationTimestamp ? { creationTimestamp: valid.metadata.creationTimestamp } : {}),
    };
  }
  const unknown = (): Condition => ({
    ...makeCondition(
      ProviderConditions.credentialsResolved,
      false,
      ProviderReasons.configurationInvalid,
      'the spec is invalid',
      generation,
      now,
    ),
    status: 'Unknown',
  });
  const credentialCondition = cred
    ? makeCondition(ProviderConditions.credentialsResolved, cred.ok, cred.reason, cred.message, generation, now)
    : unknown();
  let ready: Condition;
  if (input.problems && input.problems.length > 0) {
    const text = input.problems.map(formatProblem).join('; ');
    const tail = valid ? '; the last valid version stays in force' : '';
    ready = makeCondition(
      ProviderConditions.ready,
      false,
      ProviderReasons.configurationInvalid,
      `${text.slice(0, 1000)}${tail}`,
      generation,
      now,
    );
  } else {
    const reason = record?.reason ?? ProviderReasons.configurationInvalid;
    ready = makeCondition(
      ProviderConditions.ready,
      record?.ready ?? false,
      reason,
      record?.message ?? 'the spec is invalid',
      generation,
      now,
    );
  }
  const credential = cred?.ok && cred.credential && input.canSeal ? cred.credential : undefined;
  return { ...(record ? { record } : {}), ...(credential ? { credential } : {}), conditions: [credentialCondition, ready] };
}
