import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** A credential file's `Authorization` value, or why there is none (never the value). */
export type CredentialFileRead = { readonly ok: true; readonly header: string } | { readonly ok: false; readonly error: string };

interface Loaded {
  readonly ino: number;
  readonly mtimeMs: number;
  readonly size: number;
  readonly header: string;
}

/**
 * One-line credential files `<dir>/<namespace>/<name>` (Secret keys mounted into a pod), as `Bearer <contents>`:
 * the engine credentials ModelServers name (`spec.engineAuth.credential`), read by the gateway for its engine legs
 * and by the pod-watcher for its own engine reads. The caller passes a namespace and a name of one path segment
 * each (the CRD pattern), so a spec reaches only its own namespace's files. A file is read again when its inode,
 * mtime or size changes (a rotated Secret: the kubelet swaps a symlink); its value is never part of an error.
 */
export class CredentialFiles {
  readonly dir: string;
  readonly #loaded = new Map<string, Loaded>();

  constructor(dir: string) {
    this.dir = dir;
  }

  /** `Bearer <contents>` of `<dir>/<namespace>/<name>`, or why it cannot be read (a missing file is `no such file`). */
  bearer(namespace: string, name: string): CredentialFileRead {
    const path = join(this.dir, namespace, name);
    try {
      const stat = statSync(path);
      const cached = this.#loaded.get(path);
      if (cached !== undefined && cached.ino === stat.ino && cached.mtimeMs === stat.mtimeMs && cached.size === stat.size)
        return { ok: true, header: cached.header };
      const token = readFileSync(path, 'utf8').trim();
      if (token.length === 0 || /[\r\n]/.test(token)) throw new Error('empty, or more than one line');
      // Other control characters cannot go in a header either (a raw HTTP writer would send them as they are).
      if (!isHeaderValue(token)) throw new Error('contains characters a header cannot carry');
      const header = `Bearer ${token}`;
      this.#loaded.set(path, { ino: stat.ino, mtimeMs: stat.mtimeMs, size: stat.size, header });
      return { ok: true, header };
    } catch (err) {
      this.#loaded.delete(path);
      return { ok: false, error: (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message };
    }
  }
}

/** Whether `value` can be written in an HTTP header as it is: no control character but tab. */
export function isHeaderValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return false;
  }
  return true;
}
