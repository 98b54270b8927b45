#!/usr/bin/env node
// The size of what the Dockerfile's runtime stage adds to the Node base image, layer by layer, without Docker:
// builds the CLI as the build stage does (or takes a built dist/apps/cli), then measures each COPY layer as
// files (bytes on disk, apparent) and as the gzip'd tar a registry stores (`tar -cz`, gzip's default level).
//   node tools/scripts/image-size.mjs [--dist DIR]     (DIR holds apps/cli/; default: a fresh build in a temp dir)
// apps/cli/test/image.test.ts checks that the runtime stage copies exactly these paths.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sizeOf } from './runtime-deps.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const at = process.argv.indexOf('--dist');
let dist = at > 0 ? resolve(process.argv[at + 1]) : undefined;
let temp;
if (!dist) {
  temp = mkdtempSync(join(tmpdir(), 'triad-image-size-'));
  dist = join(temp, 'dist');
  const build = spawnSync(process.execPath, [join(root, 'tools/scripts/build.mjs')], {
    cwd: join(root, 'apps/cli'),
    env: { ...process.env, TRIAD_DIST_DIR: dist },
    encoding: 'utf8',
  });
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}${build.stderr}`);
}
const app = join(dist, 'apps/cli');
if (!existsSync(join(app, 'main.cjs'))) throw new Error(`${app} holds no built CLI (main.cjs)`);

/** The runtime stage's COPY layers, in Dockerfile order: paths relative to dist/apps/cli. */
const layers = [
  ['main.cjs, package.json', ['main.cjs', 'package.json']],
  [
    'services/*.cjs',
    readdirSync(join(app, 'services'))
      .filter((f) => f.endsWith('.cjs'))
      .map((f) => `services/${f}`),
  ],
  ['node_modules', ['node_modules']],
];

const gzipBytes = (paths) => {
  const tar = spawnSync('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '-C', app, '-czf', '-', ...paths], {
    maxBuffer: 1 << 30,
  });
  if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
  return tar.stdout.length;
};
const mb = (n) => (n / 1e6).toFixed(1);
const rows = layers.map(([name, paths]) => {
  const bytes = paths.reduce((sum, p) => sum + (existsSync(join(app, p)) ? sizeOf(join(app, p)) : 0), 0);
  return { name, bytes, gzip: gzipBytes(paths.filter((p) => existsSync(join(app, p)))) };
});
const total = { name: 'total added to the base image', bytes: 0, gzip: 0 };
for (const r of rows) {
  total.bytes += r.bytes;
  total.gzip += r.gzip;
}
process.stdout.write('| runtime-stage layer | files MB | gzip MB (as pushed) |\n|---|---:|---:|\n');
for (const r of [...rows, total]) process.stdout.write(`| ${r.name} | ${mb(r.bytes)} | ${mb(r.gzip)} |\n`);
if (temp) rmSync(temp, { recursive: true, force: true });
