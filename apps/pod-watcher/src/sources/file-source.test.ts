import { parseSourceFile } from './file-source';

describe('source file parsing', () => {
  it('identifies watched objects, defaults the namespace, skips other kinds and empty documents', () => {
    const r = parseSourceFile(
      'kind: Pod\nmetadata: {name: a}\n---\n---\nkind: Deployment\nmetadata: {name: x}\n---\nkind: ' +
        'ModelServer\nmetadata: {name: m, namespace: prod}\n',
    );
    expect(r.ok && r.objects.map((o) => [o.kind, o.namespace, o.name])).toEqual([
      ['Pod', 'default', 'a'],
      ['ModelServer', 'prod', 'm'],
    ]);
  });

  it('refuses a version with a syntax error or an object without a name or kind', () => {
    expect(parseSourceFile('kind: Pod\nmetadata: {name: a\n')).toMatchObject({
      ok: false,
      error: expect.stringContaining('YAML syntax error'),
    });
    expect(parseSourceFile('kind: Pod\nmetadata: {}\n')).toMatchObject({
      ok: false,
      error: expect.stringContaining('without metadata.name'),
    });
    expect(parseSourceFile('metadata: {name: a}\n')).toMatchObject({ ok: false, error: expect.stringContaining('no kind') });
    expect(parseSourceFile('- a\n- b\n')).toMatchObject({ ok: false });
  });

  it('trusts neither copy of an object defined twice and reports it once', () => {
    const twice = 'kind: Pod\nmetadata: {name: a, labels: {v: "1"}}\n---\nkind: Pod\nmetadata: {name: a, labels: {v: "2"}}\n';
    const r = parseSourceFile(`${twice}---\n${twice}---\nkind: Pod\nmetadata: {name: b}\n`);
    expect(r.ok && r.duplicates).toEqual(['Pod/default/a']);
    expect(r.ok && r.objects.map((o) => o.name)).toEqual(['b']);
  });
});
