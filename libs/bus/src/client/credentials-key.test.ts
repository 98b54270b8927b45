import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadCredentialsKey } from './credentials-key';

describe('credentials key', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-key-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const key = randomBytes(32);

  it('reads the file (a mounted Secret), else TRIAD_CREDENTIALS_KEY, else none', () => {
    writeFileSync(join(dir, 'key'), `${key.toString('base64')}\n`);
    expect(loadCredentialsKey(join(dir, 'key'), {})).toEqual(key);
    expect(loadCredentialsKey(undefined, { TRIAD_CREDENTIALS_KEY: key.toString('hex') })).toEqual(key);
    expect(loadCredentialsKey(undefined, {})).toBeUndefined();
  });

  it('takes a missing file (the optional Secret is absent) as no key, and refuses a malformed key', () => {
    expect(loadCredentialsKey(join(dir, 'absent'), {})).toBeUndefined();
    writeFileSync(join(dir, 'bad'), 'not-a-key');
    expect(() => loadCredentialsKey(join(dir, 'bad'), {})).toThrow(
      `invalid credentials key in ${join(dir, 'bad')}: a credentials key is 32 bytes`,
    );
  });
});
