import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCode } from '@triad/errors';
import { RequestError } from '@triad/request';

interface Loaded {
  readonly ino: number;
  readonly mtimeMs: number;
  readonly size: number;
  readonly header: string;
}

/**
 * Engine credentials a ModelServer names (`spec.engineAuth.credential`): the file `<dir>/<namespace>/<name>`, for
 * instance a Secret key mounted into the gateway pods, sent as `Authorization: Bearer <contents>` to that server's
 * engines. A ModelServer reaches only the files of its own namespace, and the name is one path segment (the CRD
 * pattern), so a spec cannot make the gateway send any other file. The file is read again when its inode, mtime or
 * size changes (a rotated Secret: the kubelet swaps a symlink), and its value is never logged.
 */
export class EngineCredentials {
  readonly #dir: string;
  readonly #loaded = new Map<string, Loaded>();

  constructor(dir: string) {
    this.#dir = dir;
  }

  /** The `authorization` value for the engines of `namespace`'s credential `name`; throws a 503 request error when unreadable. */
  authorization(namespace: string, name: string): string {
    const path = join(this.#dir, namespace, name);
    try {
      const stat = statSync(path);
      const cached = this.#loaded.get(path);
      if (cached !== undefined && cached.ino === stat.ino && cached.mtimeMs === stat.mtimeMs && cached.size === stat.size)
        return cached.header;
      const token = readFileSync(path, 'utf8').trim();
      if (token.length === 0 || /[\r\n]/.test(token)) throw new Error('empty, or more than one line');
      const header = `Bearer ${token}`;
      this.#loaded.set(path, { ino: stat.ino, mtimeMs: stat.mtimeMs, size: stat.size, header });
      return header;
    } catch (err) {
      this.#loaded.delete(path);
      const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message;
      throw new RequestError(
        ErrorCode.EngineCredentialUnavailable,
        `the engine credential ${namespace}/${name} of this model server is not available to the gateway (${why})`,
      );
    }
  }
}
