import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';

// Provider credentials travel from the pod-watcher (which reads the Secret) to the gateway (which sends them
// upstream) through NATS KV. They are sealed with AES-256-GCM under a key both hold (a Kubernetes Secret mounted
// into both): NATS readers without it (the scheduler, anything else on the bus) and JetStream's file store on
// disk see ciphertext only. The KV key is the additional authenticated data, so a record copied under another
// provider's key does not open.

export const SealedCredentialSchema = z.object({
  alg: z.literal('A256GCM'),
  /** First 16 hex digits of SHA-256 of the key: tells a reader with another key why it cannot open it. */
  kid: z.string().regex(/^[0-9a-f]{16}$/),
  iv: z.string().min(1),
  tag: z.string().min(1),
  data: z.string(),
});
export type SealedCredential = z.infer<typeof SealedCredentialSchema>;

/** The identifier of a credentials key (what `kid` holds). */
export function credentialsKeyId(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/**
 * Reads a credentials key: 32 bytes written as base64 (`openssl rand -base64 32`) or as 64 hex digits.
 * Surrounding whitespace is ignored (a Secret file often ends with a newline).
 */
export function parseCredentialsKey(text: string): { ok: true; key: Buffer } | { ok: false; error: string } {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : /^[A-Za-z0-9+/]+={0,2}$/.test(t) ? Buffer.from(t, 'base64') : undefined;
  if (!key || key.length !== 32) {
    return { ok: false, error: 'a credentials key is 32 bytes, written as base64 (openssl rand -base64 32) or 64 hex digits' };
  }
  return { ok: true, key };
}

/** Seals `token` for the KV key `aad` (`ns.provider`). */
export function sealCredential(token: string, key: Uint8Array, aad: string): SealedCredential {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const data = Buffer.concat([cipher.update(token, 'utf8'), cipher.final()]);
  const tag = cipher.getAuthTag();
  return {
    alg: 'A256GCM',
    kid: credentialsKeyId(key),
    iv: iv.toString('base64'),
    tag: tag.toString('base64'),
    data: data.toString('base64'),
  };
}

/** Opens a sealed credential; the error says why without ever containing the value. */
export function openCredential(
  sealed: SealedCredential,
  key: Uint8Array,
  aad: string,
): { ok: true; token: string } | { ok: false; error: string } {
  if (sealed.kid !== credentialsKeyId(key))
    return { ok: false, error: `sealed with key ${sealed.kid}, this process holds ${credentialsKeyId(key)}` };
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    const token = Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
    return { ok: true, token };
  } catch {
    return { ok: false, error: `the credential for ${aad} does not open (tampered, or sealed for another key)` };
  }
}
