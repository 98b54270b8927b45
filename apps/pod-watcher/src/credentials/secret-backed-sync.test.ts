import { randomBytes } from 'node:crypto';
import { openCredential } from '@triad/bus';
import { SecretBackedSync, type SecretBackedSyncOptions } from './secret-backed-sync';

/** The smallest specialisation: objects are `namespace/name` → the Secret each names; a flush lists what it decides. */
class ListedSync extends SecretBackedSync {
  readonly secretOf = new Map<string, string>();

  constructor(options: SecretBackedSyncOptions) {
    super(options);
  }

  changed(namespace: string, name: string): void {
    this.mark(namespace, name);
  }

  protected *namingSecret(namespace: string, secret: string): Iterable<string> {
    for (const [id, named] of this.secretOf) {
      const [ns, name] = id.split('/') as [string, string];
      if (ns === namespace && named === secret) yield name;
    }
  }

  flush(): string[] {
    const keys: string[] = [];
    this.drain((_namespace, _name, key) => keys.push(key));
    return keys;
  }

  sealFor(key: string, token: string, context?: string) {
    return this.seal(key, token, `aad:${key}`, context);
  }

  forget(key: string): void {
    this.forgetSeal(key);
  }

  get sealable(): boolean {
    return this.canSeal;
  }
}

describe('Secret-backed sync bookkeeping', () => {
  const credentialsKey = randomBytes(32);

  it('decides again the objects that changed and those of the namespace naming a changed Secret, each once', () => {
    const sync = new ListedSync({ credentialsKey });
    sync.secretOf.set('llm/a', 'key-1').set('llm/b', 'key-1').set('llm/c', 'key-2').set('other/d', 'key-1');
    expect(sync.pending).toBe(false);
    sync.secret('llm', 'key-1');
    sync.changed('llm', 'a');
    sync.changed('llm', 'gone');
    expect(sync.pending).toBe(true);
    expect(sync.flush().sort()).toEqual(['llm.a', 'llm.b', 'llm.gone']);
    expect(sync.pending).toBe(false);
    expect(sync.flush()).toEqual([]);
  });

  it('seals a value once while it and its context stay the same, and anew when either changes or it was forgotten', () => {
    const sync = new ListedSync({ credentialsKey });
    const first = sync.sealFor('llm.a', 'tok-1', 'Bearer');
    expect(openCredential(first, credentialsKey, 'aad:llm.a')).toEqual({ ok: true, token: 'tok-1' });
    expect(sync.sealFor('llm.a', 'tok-1', 'Bearer')).toBe(first);
    const otherContext = sync.sealFor('llm.a', 'tok-1', 'APIKey');
    expect(otherContext).not.toBe(first);
    const rotated = sync.sealFor('llm.a', 'tok-2', 'APIKey');
    expect(openCredential(rotated, credentialsKey, 'aad:llm.a')).toEqual({ ok: true, token: 'tok-2' });
    sync.forget('llm.a');
    expect(sync.sealFor('llm.a', 'tok-2', 'APIKey')).not.toBe(rotated);
    // Keys are sealed apart: the same value under another key is its own seal.
    expect(sync.sealFor('llm.b', 'tok-2', 'APIKey')).not.toBe(sync.sealFor('llm.a', 'tok-2', 'APIKey'));
  });

  it('cannot seal without a credentials key', () => {
    expect(new ListedSync({}).sealable).toBe(false);
    expect(new ListedSync({ credentialsKey }).sealable).toBe(true);
  });
});
