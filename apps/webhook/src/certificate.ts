import { readFile } from 'node:fs/promises';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { watchFile, type Logger } from '@triad/runtime';

/** Reads a PEM certificate chain and key, and checks that TLS accepts the pair. */
export async function loadKeyPair(certFile: string, keyFile: string): Promise<SecureContextOptions> {
  const [cert, key] = await Promise.all([readFile(certFile), readFile(keyFile)]);
  // Throws when the files do not parse or the key does not belong to the certificate.
  createSecureContext({ cert, key });
  return { cert, key };
}

export interface CertificateWatcherOptions {
  readonly certFile: string;
  readonly keyFile: string;
  /** Puts a freshly loaded pair in service. */
  readonly apply: (pair: SecureContextOptions) => void;
  readonly logger: Logger;
  readonly onResult?: (ok: boolean) => void;
}

/**
 * Follows the certificate files (`watchFile`, which sees a mounted Secret's `..data` symlink swap) and re-reads
 * the pair 100 ms after the last change of either, so a certificate and key written one after the other load
 * together. A pair that does not load is logged and the serving one stays.
 */
export class CertificateWatcher {
  readonly #opts: CertificateWatcherOptions;
  readonly #watchers: { close(): void }[];
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: CertificateWatcherOptions) {
    this.#opts = options;
    this.#watchers = [...new Set([options.certFile, options.keyFile])].map((file) =>
      watchFile(
        file,
        () => this.#schedule(),
        (err) => options.logger.warn({ file, err: err.message }, 'certificate watch failed'),
      ),
    );
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
