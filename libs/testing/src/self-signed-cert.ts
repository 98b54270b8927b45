import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * Writes a self-signed P-256 certificate for `localhost` and 127.0.0.1 (common name `name`, valid one day) and its
 * key as `<dir>/<name>.crt` and `<dir>/<name>.key`, with the machine's openssl, and returns their paths. Tests serve
 * TLS with it and trust it as its own CA.
 */
export function writeSelfSignedCert(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}
