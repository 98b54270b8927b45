import { randomBytes } from 'node:crypto';
import { credentialsKeyId, openCredential, parseCredentialsKey, sealCredential } from './credentials';
import { inferencePoolServerName, parseInferencePoolServerName } from './names';

describe('sealed provider credentials', () => {
  const key = randomBytes(32);

  it('round-trips, and the sealed form shows neither the token nor a fixed pattern', () => {
    const a = sealCredential('sk-live-123', key, 'default.openai');
    const b = sealCredential('sk-live-123', key, 'default.openai');
    expect(JSON.stringify(a)).not.toContain('sk-live');
    expect(a.data).not.toBe(b.data);
    expect(openCredential(a, key, 'default.openai')).toEqual({ ok: true, token: 'sk-live-123' });
  });

  it('refuses another key, another KV key (AAD) and a tampered record, without the value in the error', () => {
    const sealed = sealCredential('sk-live-123', key, 'default.openai');
    const other = randomBytes(32);
    const wrongKey = openCredential(sealed, other, 'default.openai');
    expect(wrongKey).toEqual({
      ok: false,
      error: `sealed with key ${credentialsKeyId(key)}, this process holds ${credentialsKeyId(other)}`,
    });
    expect(openCredential(sealed, key, 'default.anthropic')).toMatchObject({ ok: false });
    const flipped = Buffer.from(sealed.data, 'base64');
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    const tampered = openCredential({ ...sealed, data: flipped.toString('base64') }, key, 'default.openai');
    expect(tampered).toMatchObject({ ok: false });
    expect(JSON.stringify(tampered)).not.toContain('sk-live');
  });

  it('reads keys as base64 or hex, and explains a wrong one', () => {
    const b64 = key.toString('base64');
    expect(parseCredentialsKey(`${b64}\n`)).toEqual({ ok: true, key });
    expect(parseCredentialsKey(key.toString('hex'))).toEqual({ ok: true, key });
    expect(parseCredentialsKey('short')).toMatchObject({ ok: false, error: expect.stringContaining('32 bytes') });
  });

  it('names InferencePools as ModelServers no real ModelServer can be called', () => {
    expect(inferencePoolServerName('llama')).toBe('inferencepool=llama');
    expect(parseInferencePoolServerName('inferencepool=llama')).toBe('llama');
    expect(parseInferencePoolServerName('llama')).toBeUndefined();
  });
});
