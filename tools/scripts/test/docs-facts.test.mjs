import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

// Facts the docs state that something else decides, each kept in one place so the two cannot drift apart:
// the Node version (.node-version), Kthena feature status (docs/kthena-parity.md) and the sizes the build prints
// (its output, never copied into a page). README.md is read for the Node version and the sizes; its one line on
// Kthena parity says where the status is kept ("what is still pending is in docs/kthena-parity.md"), so the
// status check reads docs/ and examples/.

const root = resolve(__dirname, '../../..');
const read = (path) => readFileSync(join(root, path), 'utf8');

function* filesBelow(dir, pattern) {
  for (const entry of readdirSync(join(root, dir))) {
    const path = join(dir, entry);
    if (statSync(join(root, path)).isDirectory()) yield* filesBelow(path, pattern);
    else if (pattern.test(entry)) yield path;
  }
}

/** Every documentation page and example: what a user reads. */
const pages = () => [...filesBelow('docs', /\.md$/), ...filesBelow('examples', /\.(ya?ml|md)$/)];

/** `file:line  text` of each line of `files` that `test` picks. */
function linesWhere(files, test) {
  const found = [];
  for (const file of files) {
    read(file)
      .split('\n')
      .forEach((text, i) => {
        if (test(text, file)) found.push(`${relative(root, join(root, file))}:${i + 1}  ${text.trim()}`);
      });
  }
  return found;
}

describe('the Node version lives in .node-version', () => {
  const version = read('.node-version').trim();
  const major = version.split('.')[0];

  it('is a full version of an even (LTS) line', () => {
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Number(major) % 2).toBe(0);
  });

  it('the image is that version, pinned by digest', () => {
    const image = /^ARG NODE_IMAGE=(.*)$/m.exec(read('Dockerfile'))?.[1];
    expect(image).toMatch(new RegExp(`^node:${version.replace(/\./g, '\\.')}-[a-z]+-slim@sha256:[0-9a-f]{64}$`));
  });

  it('CI installs it from the file, engines put its line first, the README and the deployment page name it', () => {
    const ci = read('.github/workflows/ci.yml');
    expect(ci.match(/node-version-file: .*\.node-version/g)?.length).toBe(2);
    expect(JSON.parse(read('package.json')).engines.node).toMatch(new RegExp(`^\\^${major}\\.0\\.0 \\|\\| `));
    expect(read('README.md').split('\n').slice(0, 20).join('\n')).toContain(`Node ${major} LTS`);
    expect(read('docs/deployment.md')).toContain(`Node ${version} on Debian`);
  });
});

describe('Kthena feature status lives in docs/kthena-parity.md', () => {
  const STATUS = /\b(pending|not yet|planned|in progress|coming soon|not implemented|to do|todo)\b/i;

  it('every row of its table has a status from a known set', () => {
    const rows = read('docs/kthena-parity.md')
      .split('\n')
      .filter((l) => /^\| /.test(l) && !/^\| (Kthena feature|step|---)/.test(l) && !/^\| \*\*/.test(l));
    const statuses = rows.map((r) => r.split('|')[3]?.trim() ?? '').filter((s) => s !== '' && !/^`/.test(s));
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => !['done', 'partial', 'pending', 'not planned'].includes(s))).toEqual([]);
  });

  it('examples say what Triad does, never how far along it is', () => {
    const comments = [...filesBelow('examples', /\.ya?ml$/)];
    expect(linesWhere(comments, (text) => /^\s*#/.test(text) && STATUS.test(text))).toEqual([]);
  });

  it('other pages that point at it do not restate a status', () => {
    const others = pages().filter((p) => p !== join('docs', 'kthena-parity.md'));
    expect(linesWhere(others, (text) => text.includes('kthena-parity') && STATUS.test(text))).toEqual([]);
  });

  it('the check catches the drift it is for', () => {
    const planted = "# Listening on the listener's port is the gateway's part, pending (docs/kthena-parity.md);";
    expect(STATUS.test(planted) && planted.includes('kthena-parity')).toBe(true);
  });
});

describe('sizes the build prints are read from the build, not copied into pages', () => {
  const FIGURE = /\b\d+(\.\d+)?\s?(MB|MiB|KB|KiB)\b/;
  const BUILT = /\b(bundles?|node_modules|image layers?|runtime[- ]stage layers?)\b/i;

  it('no page (the README included) quotes a bundle, node_modules or image-layer size', () => {
    expect(linesWhere(['README.md', ...pages()], (text) => FIGURE.test(text) && BUILT.test(text))).toEqual([]);
  });

  it('the check catches the drift it is for', () => {
    const planted = '- **Image**: the runtime stage copies the bundle (15 MB; ASCII without comments, so V8 holds its source';
    expect(FIGURE.test(planted) && BUILT.test(planted)).toBe(true);
  });
});
