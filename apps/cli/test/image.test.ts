import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative, resolve } from 'node:path';
import { aggregatedManifests, freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';

// The container image without a Docker daemon: the CLI is built as the Dockerfile's build stage builds it (into a
// temp dist/), the runtime stage's COPY steps are replayed into an empty directory, and the services run from
// there with `node` alone. Nothing of this checkout's node_modules is reachable from that directory, so a
// package the bundle needs but the image does not ship fails these tests.

const ROOT = resolve(__dirname, '../../..');
/** The services bundled on their own (apps/cli/package.json `triad.serviceBundles`). */
const SERVICES = ['gateway', 'kv-indexer', 'pod-watcher', 'scheduler', 'webhook'];
const work = mkdtempSync(join(tmpdir(), 'triad-image-'));
const buildRoot = join(work, 'src');
const imageRoot = join(work, 'image');

interface RuntimeStage {
  readonly workdir: string;
  readonly copies: readonly { from: string; sources: readonly string[]; dest: string; intoDir: boolean }[];
  readonly runs: readonly string[];
  readonly user: string | undefined;
}

/** The last stage of the Dockerfile: WORKDIR, COPY, RUN and USER instructions (continuation lines joined). */
function runtimeStage(): RuntimeStage {
  const lines = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((l) => l.trim());
  const stage = lines.slice(lines.map((l) => l.startsWith('FROM ')).lastIndexOf(true));
  let workdir = '/';
  const copies: RuntimeStage['copies'][number][] = [];
  const runs: string[] = [];
  let user: string | undefined;
  for (const line of stage) {
    const [instruction, ...rest] = line.split(/\s+/);
    if (instruction === 'WORKDIR') workdir = posix.resolve(workdir, rest[0]);
    if (instruction === 'RUN') runs.push(rest.join(' '));
    if (instruction === 'USER') user = rest[0];
    if (instruction === 'COPY') {
      const from = rest.find((a) => a.startsWith('--from='))?.slice('--from='.length) ?? '(build context)';
      const paths = rest.filter((a) => !a.startsWith('--'));
      const dest = paths.at(-1) as string;
      // Docker copies into the destination as a directory when it ends with '/' or takes several (or wildcard) sources.
      const intoDir = dest.endsWith('/') || paths.length > 2 || paths.some((p) => p.includes('*'));
      copies.push({ from, sources: paths.slice(0, -1), dest: posix.resolve(workdir, dest), intoDir });
    }
  }
  return { workdir, copies, runs, user };
}

/** A COPY source whose last part has a `*` (as Docker matches it: any characters but `/`), as the build stage's files. */
function expandWildcard(source: string): string[] {
  const name = posix.basename(source);
  if (!name.includes('*')) return [source];
  const dir = posix.dirname(source);
  const pattern = new RegExp(
    `^${name
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]*')}$`,
  );
  return readdirSync(join(buildRoot, posix.relative('/src', dir)))
    .filter((entry) => pattern.test(entry))
    .map((entry) => posix.join(dir, entry));
}

/** Replays the COPY steps: `/src/...` of the build stage is `buildRoot/...` here, `/...` of the image `imageRoot/...`. */
function replayCopies(stage: RuntimeStage): void {
  for (const copy of stage.copies) {
    for (const source of copy.sources.flatMap(expandWildcard)) {
      const from = join(buildRoot, posix.relative('/src', source));
      const into = copy.intoDir ? join(imageRoot, copy.dest, posix.basename(source)) : join(imageRoot, copy.dest);
      mkdirSync(dirname(into), { recursive: true });
      cpSync(from, into, { recursive: true });
    }
  }
}

const children: ChildProcess[] = [];
let nats: NatsServerHandle | undefined;
let app = '';
let stage: RuntimeStage;

/** Runs `node <image>/app/main.cjs <args>` from the image directory, as the image's `triad` wrapper does. */
function triad(args: readonly string[]): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [join(app, 'main.cjs'), ...args], {
    cwd: app,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env['PATH'] ?? '', NODE_ENV: 'production', TRIAD_LOG_LEVEL: 'info' },
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  return { child, output: () => output };
}

const get = (url: string) =>
  fetch(url).then(
    async (r) => ({ status: r.status, text: await r.text() }),
    () => undefined,
  );

beforeAll(() => {
  stage = runtimeStage();
  const build = spawnSync(process.execPath, [join(ROOT, 'tools/scripts/build.mjs')], {
    cwd: join(ROOT, 'apps/cli'),
    encoding: 'utf8',
    env: { ...process.env, TRIAD_DIST_DIR: join(buildRoot, 'dist') },
  });
  if (build.status !== 0) throw new Error(`build failed: ${build.stdout}${build.stderr}`);
  replayCopies(stage);
  app = join(imageRoot, stage.workdir);
}, 180_000);

afterAll(async () => {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((done) => {
          if (c.exitCode !== null || c.signalCode !== null) return done();
          c.once('exit', () => done());
          c.kill('SIGTERM');
        }),
    ),
  );
  await nats?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('the container image, replayed from the Dockerfile without Docker', () => {
  it('ships bundles V8 can hold one byte per character: nothing above Latin-1', () => {
    for (const bundle of ['main.cjs', ...SERVICES.map((s) => `services/${s}.cjs`)]) {
      const text = readFileSync(join(app, bundle), 'utf8');
      // A single character above U+00FF makes V8 keep the whole source two bytes per character (56 MB in place of 28).
      let wide = -1;
      for (let i = 0; i < text.length && wide < 0; i++) if (text.charCodeAt(i) > 0xff) wide = i;
      expect([bundle, wide < 0 ? '' : text.slice(Math.max(0, wide - 60), wide + 20)]).toEqual([bundle, '']);
    }
  });

  it('copies only the bundle, its package.json and the native packages it needs; no npm install, no source map; runs as non-root', () => {
    expect(stage.copies.every((c) => c.from === 'build')).toBe(true);
    expect(stage.runs.join('\n')).not.toMatch(/\bnpm\b/);
    expect(stage.user).toBe('node');
    const shipped = spawnSync('find', ['.', '-type', 'f'], { cwd: app, encoding: 'utf8' }).stdout.split('\n').filter(Boolean).sort();
    // The CLI and one bundle per service (a pod loads only its own service's code).
    expect(shipped.filter((f) => !f.startsWith('./node_modules/'))).toEqual(
      ['./main.cjs', './package.json', ...SERVICES.map((s) => `./services/${s}.cjs`)].sort(),
    );
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const packages = Object.keys(manifest.dependencies);
    expect(packages).toContain('@node-rs/xxhash');
    expect(packages).toContain('zeromq');
    // The native addons and what they load at run time: xxhash (prefix hashing), zeromq (KV events) with its loader.
    const allowed = (p: string) => p.startsWith('@node-rs/xxhash') || ['zeromq', 'cmake-ts'].includes(p);
    expect(packages.filter((p) => !allowed(p))).toEqual([]);
    // Only what the runtime loads: the one zeromq addon this Node and libc load (of the 8 zeromq ships for
    // linux/x64), cmake-ts' addon loader without its builder, no sources, maps, declarations or build scripts.
    const modules = shipped.filter((f) => f.startsWith('./node_modules/'));
    const zmqBuilds = modules.filter((f) => f.startsWith('./node_modules/zeromq/build/') && f.endsWith('.node'));
    expect(zmqBuilds).toHaveLength(1);
    expect(zmqBuilds[0]?.startsWith(`./node_modules/zeromq/build/${process.platform}/${process.arch}/`)).toBe(true);
    expect(modules.filter((f) => f.startsWith('./node_modules/cmake-ts/'))).toEqual([
      './node_modules/cmake-ts/build/loader.js',
      './node_modules/cmake-ts/package.json',
    ]);
    expect(modules.filter((f) => /\.(map|ts|mts|cc|cpp|h|hpp|gyp|gypi|cmake)$|CMakeLists\.txt$|\/(src|script)\//.test(f))).toEqual([]);
    // Licences ship with the code they cover (zeromq's addon links libzmq, MPL-2.0).
    expect(modules).toEqual(expect.arrayContaining(['./node_modules/zeromq/LICENSE.txt', './node_modules/zeromq/LICENSE_MPL-2.0.txt']));
    // The `triad` wrapper the runtime stage writes runs this very file.
    expect(stage.runs.join('\n')).toContain(`exec node ${posix.join(stage.workdir, 'main.cjs')}`);
  });

  it('loads the zeromq addon from the image alone, every socket type Triad opens, with no warning', () => {
    const script =
      "const z = require('zeromq'); for (const T of [z.Publisher, z.Subscriber, z.Dealer, z.Router]) new T().close(); " +
      'process.stdout.write(z.version)';
    const run = spawnSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '' } });
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('has no node_modules above the image directory that could stand in for a missing package', () => {
    const parents: string[] = [];
    for (let dir = imageRoot; dir !== dirname(dir); dir = dirname(dir)) parents.push(dirname(dir));
    expect(parents.filter((d) => existsSync(join(d, 'node_modules')))).toEqual([]);
    expect(relative(ROOT, app).startsWith('..')).toBe(true);
  });

  it('`triad --help` lists the commands', async () => {
    const { child, output } = triad(['--help']);
    const code = await new Promise((r) => child.once('exit', r));
    expect(code).toBe(0);
    const commands = ['gateway', 'scheduler', 'pod-watcher', 'sim-engine', 'up', 'webhook', 'kv-indexer'];
    for (const command of commands) expect(output()).toContain(command);
  }, 30_000);

  it('runs a simulated engine, a pod-watcher, a scheduler and a gateway that answers a completion', async () => {
    nats = await startNatsServer();
    const [simPort, gwPort, gwOps, pwOps, schOps] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
    const sim = triad([
      'sim-engine',
      '--engine',
      'vllm',
      '--role',
      'both',
      '--host',
      '127.0.0.1',
      '--port',
      String(simPort),
      '--model',
      'tiny-model',
      '--latency-profile',
      'zero',
    ]);
    const config = join(work, 'cluster.yaml');
    writeFileSync(
      config,
      aggregatedManifests({ server: 'tiny', model: 'tiny-model', port: simPort, podIps: ['127.0.0.1'], routes: [{ modelName: 'tiny' }] }),
    );
    const watcher = triad(['pod-watcher', '--nats', nats.url, '--source', `file:${config}`, '--metrics-port', String(pwOps)]);
    const scheduler = triad(['scheduler', '--nats', nats.url, '--metrics-port', String(schOps)]);
    const gateway = triad([
      'gateway',
      '--nats',
      nats.url,
      '--host',
      '127.0.0.1',
      '--port',
      String(gwPort),
      '--metrics-port',
      String(gwOps),
    ]);
    const ready = (port: number, what: string, out: () => string) =>
      waitFor(async () => (await get(`http://127.0.0.1:${port}/readyz`))?.status === 200, {
        what: `${what} ready; output:\n${out()}`,
        timeoutMs: 60_000,
        intervalMs: 100,
      });
    const simModels = async () => (await get(`http://127.0.0.1:${simPort}/v1/models`))?.text.includes('tiny-model');
    await waitFor(simModels, { what: `sim engine; output:\n${sim.output()}`, timeoutMs: 60_000 });
    await ready(pwOps, 'pod-watcher', watcher.output);
    await ready(schOps, 'scheduler', scheduler.output);
    await ready(gwOps, 'gateway', gateway.output);
    expect((await get(`http://127.0.0.1:${gwOps}/healthz`))?.status).toBe(200);

    const listed = async () => (await get(`http://127.0.0.1:${gwPort}/v1/models`))?.text.includes('"tiny"');
    await waitFor(listed, { what: 'model listed', timeoutMs: 30_000 });
    const res = await fetch(`http://127.0.0.1:${gwPort}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 4 }),
    });
    const body = (await res.json()) as { choices?: { message?: { content?: string } }[] };
    expect(res.status).toBe(200);
    expect(body.choices?.[0]?.message?.content?.length).toBeGreaterThan(0);
  }, 120_000);
});
