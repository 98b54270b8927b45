import { ErrorCode } from '@triad/errors';
import { RequestError } from '@triad/request';
import { CredentialFiles } from '@triad/runtime';

/**
 * Engine credentials a ModelServer names (`spec.engineAuth.credential`): the file `<dir>/<namespace>/<name>`, for
 * instance a Secret key mounted into the gateway pods, sent as `Authorization: Bearer <contents>` to that server's
 * engines. The files are read (and re-read on rotation) by {@link CredentialFiles}, which the pod-watcher's own
 * engine reads share; a file that cannot be read fails the request with a 503 naming it, never its value.
 */
export class EngineCredentials {
  readonly #files: CredentialFiles;

  constructor(dir: string) {
    this.#files = new CredentialFiles(dir);
  }

  /** The `authorization` value for the engines of `namespace`'s credential `name`; throws a 503 request error when unreadable. */
  authorization(namespace: string, name: string): string {
    const read = this.#files.bearer(namespace, name);
    if (read.ok) return read.header;
    throw new RequestError(
      ErrorCode.EngineCredentialUnavailable,
      `the engine credential ${namespace}/${name} of this model server is not available to the gateway (${read.error})`,
    );
  }
}
