import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@triad/testing';
import { watchFile } from './file-watch';

describe('watchFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'triad-watch-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reports each new content, in place or swapped in by rename, and ignores other files and same-content writes', async () => {
    const file = join(dir, 'config.yaml');
    writeFileSync(file, 'a: 1\n');
    const seen: string[] = [];
    const errors: Error[] = [];
    const watch = watchFile(
      file,
      (text) => seen.push(text),
      (err) => errors.push(err),
      { settleMs: 10 },
    );
    try {
      writeFileSync(file, 'a: 2\n');
      await waitFor(() => seen.length === 1, { what: 'in-place edit' });
      writeFileSync(join(dir, 'other.yaml'), 'b: 1\n');
      writeFileSync(file, 'a: 2\n');
      writeFileSync(`${file}.tmp`, 'a: 3\n');
      renameSync(`${file}.tmp`, file);
      await waitFor(() => seen.length === 2, { what: 'rename over the file' });
      expect(seen).toEqual(['a: 2\n', 'a: 3\n']);
      expect(errors).toEqual([]);
    } finally {
      watch.close();
    }
  });
});
