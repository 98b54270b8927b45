import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import type { Logger } from '@triad/runtime';

/** Reads a PEM certificate chain and key, and checks that TLS accepts the pair. */
export async function loadKeyPair(certFile: string, keyFile: string): Promise<SecureContextOptions> {
  const [cert, key] = await Promise.all([readFile(certFile), readFile(keyFile)]);
  // Throws when the files do not parse or the key does not belong to the certificate.
  createSecureContext({ cert, key });
  return { cert, key };
}

/**
 * Follows the certificate files: their directories are watched (a mounted Secret swaps a `..data` symlink, which a
 * watch on the file itself misses) and the pair is re-read 100 ms after the last change. A pair that does not
 * load is logged and the serving one stays.
 */
export interface CertificateWatcherOptions {
  readonly certFile: string;
  readonly keyFile: string;
  /** Puts a freshly loaded pair in service. */
  readonly apply: (pair: SecureContextOptions) => void;
  readonly logger: Logger;
  readonly onResult?: (ok: boolean) => void;
}

export class CertificateWatcher {
  readonly #opts: CertificateWatcherOptions;
  readonly #watchers: FSWatcher[] = [];
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: CertificateWatcherOptions) {
    this.#opts = options;
    for (const dir of new Set([dirname(options.certFile), dirname(options.keyFile)])) {
      const w = watch(dir, () => this.#schedule());
      w.on('error', (err) => options.logger.warn({ dir, err: err.message }, 'certificate watch failed'));
      this.#watchers.push(w);
    }
  }

  /** Re-reads the pair now (what a change does after the debounce). */
  async reload(): Promise<boolean> {
    const { certFile, keyFile, logger } = this.#opts;
    try {
      this.#opts.apply(await loadKeyPair(certFile, keyFile));
      logger.info({ cert: certFile }, 'serving certificate reloaded');
      this.#opts.onResult?.(true);
      return true;
    } catch (err) {
      logger.warn({ cert: certFile, err: (err as Error).message }, 'certificate reload failed; keeping the current one');
      this.#opts.onResult?.(false);
      return false;
    }
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    for (const w of this.#watchers) w.close();
  }

  #schedule(): void {
    if (this.#closed) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.reload(), 100);
  }
}
