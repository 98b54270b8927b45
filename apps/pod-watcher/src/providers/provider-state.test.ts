import { API_VERSION, ExternalModelProviderSchema, type ExternalModelProvider } from '@triad/crd';
import type { StoredSecret } from '../inventory/secret-store';
import { decideProvider, type ProviderInput } from './provider-state';

const now = new Date('2026-01-01T00:00:00Z');
function provider(spec: Record<string, unknown>): ExternalModelProvider {
  return ExternalModelProviderSchema.parse({
    apiVersion: API_VERSION,
    kind: 'ExternalModelProvider',
    metadata: { name: 'p', namespace: 'llm' },
    spec: { baseURL: 'https://api.example.com', ...spec },
  });
}
const withAuth = (scheme?: string, providerType = 'OpenAI') =>
  provider({ providerType, auth: { ...(scheme ? { scheme } : {}), secretRef: { name: 'key', key: 'token' } } });
const secrets =
  (data?: Record<string, string>) =>
  (ns: string, name: string): StoredSecret | undefined =>
    data && ns === 'llm' && name === 'key' ? { namespace: ns, name, data } : undefined;
const input = (over: Partial<ProviderInput>): ProviderInput => ({
  namespace: 'llm',
  name: 'p',
  generation: 3,
  secret: secrets(),
  canSeal: true,
  now,
  ...over,
});
const summary = (o: ReturnType<typeof decideProvider>) => o.conditions.map((c) => `${c.type}=${c.status}/${c.reason}`);

describe('ExternalModelProvider conditions (Kthena reasons)', () => {
  it('no auth: CredentialNotRequired, Ready', () => {
    const o = decideProvider(input({ valid: provider({}) }));
    expect(summary(o)).toEqual(['CredentialsResolved=True/CredentialNotRequired', 'Ready=True/Ready']);
    expect(o.record).toMatchObject({ ready: true, reason: 'Ready', spec: { providerType: 'OpenAI' } });
    expect(o.record?.auth).toBeUndefined();
    expect(o.credential).toBeUndefined();
    expect(o.conditions.every((c) => c.observedGeneration === 3)).toBe(true);
  });

  it.each([
    ['Secret missing (or unlabelled)', undefined, 'CredentialNotFound'],
    ['key missing', { other: 'x' }, 'CredentialKeyNotFound'],
    ['key empty', { token: '' }, 'CredentialKeyNotFound'],
    ['only whitespace', { token: ' \n' }, 'CredentialInvalid'],
    ['control characters', { token: 'sk-a\u0001b' }, 'CredentialInvalid'],
  ])('%s: %s', (_name, data, reason) => {
    const o = decideProvider(input({ valid: withAuth(), secret: secrets(data) }));
    expect(summary(o)).toEqual([`CredentialsResolved=False/${reason}`, `Ready=False/${reason}`]);
    expect(o.record).toMatchObject({ ready: false, reason });
    expect(o.credential).toBeUndefined();
    expect(JSON.stringify(o)).not.toContain('sk-a');
  });

  it("resolves the credential with the default scheme of each provider type, or the spec's", () => {
    expect(decideProvider(input({ valid: withAuth(), secret: secrets({ token: ' sk-1\n' }) })).credential).toEqual({
      scheme: 'Bearer',
      header: 'authorization',
      token: 'sk-1',
    });
    expect(decideProvider(input({ valid: withAuth(undefined, 'Anthropic'), secret: secrets({ token: 'sk-2' }) })).credential).toEqual({
      scheme: 'APIKey',
      header: 'x-api-key',
      token: 'sk-2',
    });
    const o = decideProvider(input({ valid: withAuth('APIKey'), secret: secrets({ token: 'sk-3' }) }));
    expect(o.record?.auth).toEqual({ scheme: 'APIKey', header: 'x-api-key' });
    expect(summary(o)).toEqual(['CredentialsResolved=True/CredentialResolved', 'Ready=True/Ready']);
  });

  it('without a credentials key the credential resolves but is not distributable', () => {
    const o = decideProvider(input({ valid: withAuth(), secret: secrets({ token: 'sk-1' }), canSeal: false }));
    expect(summary(o)).toEqual(['CredentialsResolved=True/CredentialResolved', 'Ready=False/CredentialNotDistributable']);
    expect(o.credential).toBeUndefined();
    expect(o.record?.ready).toBe(false);
  });

  it('an invalid latest version: ConfigurationInvalid with the problems, the last valid one still published', () => {
    const o = decideProvider(input({ valid: provider({}), problems: [{ path: 'spec.baseURL', message: 'must start with https://' }] }));
    expect(o.conditions[1]).toMatchObject({
      type: 'Ready',
      status: 'False',
      reason: 'ConfigurationInvalid',
      message: 'spec.baseURL: must start with https://; the last valid version stays in force',
    });
    expect(o.record?.ready).toBe(true);
    const none = decideProvider(input({ problems: [{ path: 'spec.baseURL', message: 'must start with https://' }] }));
    expect(none.record).toBeUndefined();
    expect(summary(none)).toEqual(['CredentialsResolved=Unknown/ConfigurationInvalid', 'Ready=False/ConfigurationInvalid']);
  });
});
