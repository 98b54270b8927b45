import type { StoredSecret } from '../inventory/secret-store';
import { engineCredentialCondition, resolveEngineCredential } from './engine-credential-state';

const ref = { name: 'engine-key', key: 'token' };
const secrets =
  (data?: Record<string, string>) =>
  (ns: string, name: string): StoredSecret | undefined =>
    data && ns === 'llm' && name === 'engine-key' ? { namespace: ns, name, data } : undefined;

describe('engine credential resolution (the reasons providers use)', () => {
  it('resolves a trimmed value', () => {
    expect(resolveEngineCredential('llm', ref, secrets({ token: '  tok-1\n' }), true)).toEqual({
      resolved: true,
      reason: 'CredentialResolved',
      message: 'key token of Secret llm/engine-key is in use',
      token: 'tok-1',
    });
  });

  it.each([
    ['Secret missing (or unlabelled)', undefined, 'CredentialNotFound', 'Secret llm/engine-key is not found or does not have label'],
    ['key missing', { other: 'x' }, 'CredentialKeyNotFound', 'key token of Secret llm/engine-key is missing or empty'],
    ['key empty', { token: '' }, 'CredentialKeyNotFound', 'key token of Secret llm/engine-key is missing or empty'],
    ['only whitespace', { token: ' \n' }, 'CredentialInvalid', 'key token of Secret llm/engine-key is empty after trimming whitespace'],
    [
      'control characters',
      { token: 'tok-a\u0001b' },
      'CredentialInvalid',
      'key token of Secret llm/engine-key contains invalid HTTP header characters',
    ],
  ])('%s: %s', (_name, data, reason, message) => {
    const o = resolveEngineCredential('llm', ref, secrets(data), true);
    expect(o).toMatchObject({ resolved: false, reason });
    expect(o.message).toContain(message);
    expect(JSON.stringify(o)).not.toContain('tok-a');
  });

  it('a Secret of another namespace is not read', () => {
    expect(resolveEngineCredential('other', ref, secrets({ token: 'tok-1' }), true)).toMatchObject({
      resolved: false,
      reason: 'CredentialNotFound',
    });
  });

  it('without a credentials key the value resolves but cannot be distributed', () => {
    const o = resolveEngineCredential('llm', ref, secrets({ token: 'tok-1' }), false);
    expect(o).toMatchObject({ resolved: false, reason: 'CredentialNotDistributable' });
    expect(JSON.stringify(o)).not.toContain('tok-1');
  });

  it('the condition carries the outcome and the generation', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    const o = resolveEngineCredential('llm', ref, secrets({}), true);
    expect(engineCredentialCondition(o, 4, now)).toMatchObject({
      type: 'EngineCredentialResolved',
      status: 'False',
      reason: 'CredentialKeyNotFound',
      observedGeneration: 4,
    });
  });
});
