import { readFileSync } from 'node:fs';
import { parseCredentialsKey } from '@triad/bus';
import { CREDENTIALS_KEY_ENV, type WatcherConfig } from '../config';

/**
 * The key provider credentials are sealed with: the file `--credentials-key-file` names (a mounted Secret), else
 * `TRIAD_CREDENTIALS_KEY`, else none (providers that authenticate then report that the gateway cannot get
 * their credential). A missing file is no key (the Secret volume is optional); a key that is present but
 * malformed, or a file that cannot be read, stops the watcher with the reason.
 */
export function loadCredentialsKey(
  config: Pick<WatcherConfig, 'credentialsKeyFile'>,
  env: NodeJS.ProcessEnv = process.env,
): Buffer | undefined {
  let text: string | undefined;
  let where: string;
  if (config.credentialsKeyFile) {
    where = config.credentialsKeyFile;
    try {
      text = readFileSync(config.credentialsKeyFile, 'utf8');
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
