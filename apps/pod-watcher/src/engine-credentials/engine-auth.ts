import type { ModelServer } from '@triad/crd';
import type { CredentialFiles } from '@triad/runtime';
import type { StoredSecret } from '../inventory/secret-store';
import { resolveEngineCredential } from './engine-credential-state';

/**
 * What the watcher's own reads of an engine's API (`/v1/models`, SGLang `/server_info`) carry: `header` is the
 * `Authorization` value, when there is one; `from` says where it came from, or why there is none, for the log line
 * of a refused read. `from` never holds the value.
 */
export interface EngineAuth {
  readonly header?: string;
  readonly from: string;
}

export interface EngineAuthSources {
  readonly modelServer: (namespace: string, name: string) => ModelServer | undefined;
  readonly secret: (namespace: string, name: string) => StoredSecret | undefined;
  /** The engine credentials dir as the gateway mounts it (`--engine-credentials-dir`); absent: none read. */
  readonly files?: CredentialFiles;
}

/**
 * The `Authorization` a ModelServer's engines expect, for the watcher's own reads of them, asked at every read so a
 * rotated Secret or file is used by the next one. `engineAuth.secretRef`: the Secret value the watcher holds anyway
 * (checked as for the gateway; sent even without a credentials key, since it never leaves this process here).
 * `engineAuth.credential`: the file the gateway reads, when the watcher has the same directory mounted.
 * `engineAuth.passThrough`: nothing (the key is each client's, per request); the engine's metrics stay readable.
 */
export function engineAuthOf(sources: EngineAuthSources, namespace: string, server: string): EngineAuth {
  const who = `ModelServer ${namespace}/${server}`;
  const auth = sources.modelServer(namespace, server)?.spec.engineAuth;
  if (auth?.secretRef !== undefined) {
    const outcome = resolveEngineCredential(namespace, auth.secretRef, sources.secret, true);
    const { name, key } = auth.secretRef;
    if (outcome.resolved) return { header: `Bearer ${outcome.token}`, from: `key ${key} of Secret ${namespace}/${name} (${who})` };
    return { from: `none: ${outcome.message} (${who})` };
  }
  if (auth?.credential !== undefined) {
    const files = sources.files;
    if (files === undefined)
      return {
        from:
          `none: ${who} names engine credential ${auth.credential}, a file of the gateway; the pod-watcher reads it ` +
          'only with --engine-credentials-dir (TRIAD_ENGINE_CREDENTIALS_DIR) mounted as at the gateway',
      };
    const path = `${files.dir}/${namespace}/${auth.credential}`;
    const read = files.bearer(namespace, auth.credential);
    if (read.ok) return { header: read.header, from: `credential file ${path} (${who})` };
    return { from: `none: credential file ${path}: ${read.error} (${who})` };
  }
  if (auth?.passThrough === true)
    return { from: `none: ${who} uses engineAuth.passThrough (the key is each client's; the watcher has none)` };
  return { from: `none: ${who} sets no engineAuth` };
}
