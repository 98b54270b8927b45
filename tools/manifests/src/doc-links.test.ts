import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brokenDocLinks, headingAnchors, markdownFilesUnder, markdownLinkTargets } from './doc-links';

// The README and docs/ are the user's map of the project: a link that leads nowhere (a moved page, a renamed
// heading) is a broken promise, so every relative link must reach a file and, in Markdown, a heading.

const root = join(__dirname, '../../..');

describe('README.md and docs/', () => {
  it('every relative link resolves to a file and, for a Markdown target, to one of its headings', () => {
    const files = [join(root, 'README.md'), ...markdownFilesUnder(join(root, 'docs'))];
    expect(files.length).toBeGreaterThan(10);
    expect(brokenDocLinks(root, files)).toEqual([]);
  });

  it('the README opens with the two commands for a fresh machine, and .ci/run runs exactly its test command', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme);
    expect(firstBlock).not.toBeNull();
    // "At the very top": before the first section heading.
    expect(firstBlock?.index).toBeLessThan(readme.indexOf('\n## '));
    const commands = (firstBlock?.[1] ?? '')
      .split('\n')
      .map((line) => line.replace(/#.*$/, '').trim())
      .filter((line) => line !== '');
    expect(commands).toEqual(['npm ci && npm start', 'npm test']);

    const ciCommands = readFileSync(join(root, '.ci/run'), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    // CI installs with `npm ci` and then runs the README's test command, bounded by a time limit.
    expect(ciCommands.some((line) => /^npm ci\b/.test(line))).toBe(true);
    expect(ciCommands.filter((line) => /(^|\s)npm test$/.test(line))).toHaveLength(1);
  });
});

describe('the link check', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'doc-links-'));
    mkdirSync(join(dir, 'docs'));
    writeFileSync(
      join(dir, 'docs/target.md'),
      ['# Target', '', '## Connectors (`libs/connectors`)', '', '## 8. NATS', '', '## Setup', '', '## Setup', ''].join('\n'),
    );
    writeFileSync(join(dir, 'docs/image.svg'), '<svg/>');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("gives headings GitHub's anchors", () => {
    const anchors = headingAnchors(
      [
        '# Triad',
        '## Connectors (`libs/connectors`)',
        '## 8. NATS',
        '## Scheduler unreachable → local scheduling',
        '### Scrape freshness: one write per replica, not one per idle engine',
        '#### Counted in instructions (2026-12-04)',
        '## [Linked](other.md) heading',
        '## Setup',
        '## Setup',
        '```',
        '## not a heading inside code',
        '```',
      ].join('\n'),
    );
    expect([...anchors].sort()).toEqual(
      [
        'triad',
        'connectors-libsconnectors',
        '8-nats',
        'scheduler-unreachable--local-scheduling',
        'scrape-freshness-one-write-per-replica-not-one-per-idle-engine',
        'counted-in-instructions-2026-12-04',
        'linked-heading',
        'setup',
        'setup-1',
      ].sort(),
    );
  });

  it('reads link targets outside code, with titles and images, and skips code spans and fenced blocks', () => {
    const targets = markdownLinkTargets(
      [
        'See [a](docs/a.md#x) and ![pic](img/p.svg "title"), [`x[]`](b.md).',
        'Inline `[not](a-link.md)` code.',
        '```sh',
        'echo [not](a-link-either.md)',
        '```',
      ].join('\n'),
    );
    expect(targets).toEqual([
      { line: 1, target: 'docs/a.md#x' },
      { line: 1, target: 'img/p.svg' },
      { line: 1, target: 'b.md' },
    ]);
  });

  it('reports missing files and anchors, and accepts what exists', () => {
    const page = join(dir, 'README.md');
    writeFileSync(
      page,
      [
        '# Readme',
        '[ok](docs/target.md#connectors-libsconnectors) [ok](docs/target.md#setup-1) [ok](docs/image.svg) [ok](#readme)',
        '[ok](https://example.com/missing.md) [ok](docs/)',
        '[gone](docs/moved.md)',
        '[stale](docs/target.md#connectors)',
        '[self](#nowhere)',
      ].join('\n'),
    );
    expect(brokenDocLinks(dir, [page])).toEqual([
      'README.md:4: docs/moved.md (no such file)',
      'README.md:5: docs/target.md#connectors (no heading with this anchor)',
      'README.md:6: #nowhere (no heading with this anchor)',
    ]);
  });
});
