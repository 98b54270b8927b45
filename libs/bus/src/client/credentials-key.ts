import { readFileSync } from 'node:fs';
import { parseCredentialsKey } from '../credentials';

/** The variable that may hold the key inline, base64 or hex (`triad up` sets it; a Secret file is preferred in a cluster). */
export const CREDENTIALS_KEY_ENV = 'TRIAD_CREDENTIALS_KEY';

/**
 * The key provider credentials are sealed (pod-watcher) and opened (gateway) with: the file `--credentials-key-file`
 * names (a mounted Secret), else `TRIAD_CREDENTIALS_KEY`, else none (providers that authenticate are then not
 * usable). A missing file is no key (the Secret volume is optional); a key that is present but malformed, or a
 * file that cannot be read, stops the service with the reason, never the value.
 */
export function loadCredentialsKey(file: string | undefined, env: NodeJS.ProcessEnv = process.env): Buffer | undefined {
  let text: string | undefined;
  let where: string;
  if (file) {
    where = file;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return undefined;
      throw new Error(`cannot read the credentials key file ${where}: ${code ?? (err as Error).message}`, { cause: err });
    }
  } else {
    where = CREDENTIALS_KEY_ENV;
    text = env[CREDENTIALS_KEY_ENV];
    if (text === undefined || text === '') return undefined;
  }
  const parsed = parseCredentialsKey(text);
  if (!parsed.ok) throw new Error(`invalid credentials key in ${where}: ${parsed.error}`);
  return parsed.key;
}
