import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CredentialFiles } from './credential-files';

describe('CredentialFiles', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-credential-files-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A Secret volume as the kubelet writes it: `<name>` → `..data/<name>`, `..data` → a timestamped directory. */
  const mountSecret = (namespace: string, data: Record<string, string>, version: string) => {
    const ns = join(dir, namespace);
    mkdirSync(join(ns, version), { recursive: true });
    for (const [k, v] of Object.entries(data)) writeFileSync(join(ns, version, k), v);
    symlinkSync(version, join(ns, '..data_tmp'));
    renameSync(join(ns, '..data_tmp'), join(ns, '..data'));
    for (const k of Object.keys(data)) {
      try {
        symlinkSync(join('..data', k), join(ns, k));
      } catch {
        // Already linked by an earlier version.
      }
    }
  };

  it('reads a trimmed one-line value as a bearer header, and again after the kubelet swaps the Secret in', () => {
    mountSecret('llm', { 'engine-key': '  tok-1\n' }, '..2026_01_01_v1');
    const files = new CredentialFiles(dir);
    expect(files.bearer('llm', 'engine-key')).toEqual({ ok: true, header: 'Bearer tok-1' });
    mountSecret('llm', { 'engine-key': 'tok-rotated-2\n' }, '..2026_01_01_v2');
    expect(files.bearer('llm', 'engine-key')).toEqual({ ok: true, header: 'Bearer tok-rotated-2' });
  });

  it('says why a file cannot be used, never its value', () => {
    mkdirSync(join(dir, 'bad'), { recursive: true });
    writeFileSync(join(dir, 'bad', 'empty'), ' \n');
    writeFileSync(join(dir, 'bad', 'two-lines'), 'secret-a\nsecret-b\n');
    writeFileSync(join(dir, 'bad', 'control'), 'secret-\u0001c');
    const files = new CredentialFiles(dir);
    expect(files.bearer('bad', 'absent')).toEqual({ ok: false, error: 'no such file' });
    expect(files.bearer('bad', 'empty')).toEqual({ ok: false, error: 'empty, or more than one line' });
    expect(files.bearer('bad', 'two-lines')).toEqual({ ok: false, error: 'empty, or more than one line' });
    expect(files.bearer('bad', 'control')).toEqual({ ok: false, error: 'contains characters a header cannot carry' });
    // A file that goes away stops being sent (the cached value is dropped with it).
    writeFileSync(join(dir, 'bad', 'gone'), 'secret-gone');
    expect(files.bearer('bad', 'gone')).toEqual({ ok: true, header: 'Bearer secret-gone' });
    rmSync(join(dir, 'bad', 'gone'));
    expect(files.bearer('bad', 'gone')).toEqual({ ok: false, error: 'no such file' });
  });
});
