// What `npm test` needs besides `npm ci`: the real servers and tools the tests run (never stand-ins). Checked once
// before anything runs, so a missing one is one list with the commands that install it, not ten tests failing
// one by one with "not on PATH".
import { spawnSync } from 'node:child_process';

/** `a.b.c` ≥ `min` (missing parts count as 0). */
function atLeast(version, min) {
  const a = version.split('.').map(Number);
  const b = min.split('.').map(Number);
  for (let i = 0; i < b.length; i++) {
    if ((a[i] ?? 0) !== b[i]) return (a[i] ?? 0) > b[i];
  }
  return true;
}

/**
 * Runs `bin args` and reads a version from its output; says why it cannot: the program is missing (naming the
 * variable that pointed at it), fails, or is older than `min`.
 */
function versionOf(bin, args, pattern, min, variable) {
  const r = spawnSync(bin, args, { encoding: 'utf8', timeout: 20_000 });
  const named = variable ? `${variable}=${bin}` : bin;
  if (r.error) {
    if (r.error.code === 'ENOENT') return { problem: variable ? `${named}: no such file` : 'not on PATH' };
    if (r.error.code === 'EACCES') return { problem: `${named}: not executable` };
    return { problem: `${named}: ${r.error.message}` };
  }
  const version = pattern.exec(`${r.stdout}${r.stderr}`)?.[1];
  if (r.status !== 0 || version === undefined) return { problem: `\`${named} ${args.join(' ')}\` failed (exit ${r.status})` };
  if (!atLeast(version, min)) return { problem: `${version} is too old` };
  return { version };
}

/** The program a variable names, else the one on PATH. */
function program(env, variable, fallback) {
  const value = env[variable];
  return value ? { bin: value, variable } : { bin: fallback, variable: undefined };
}

/**
 * The prerequisites of `npm test`, each with the tests that need it and how to install it. `apt` lists Debian
 * packages (installed in one command); `other` is for what Debian does not ship at a usable version.
 */
export function prerequisites(env = process.env) {
  const nats = program(env, 'NATS_SERVER_BIN', 'nats-server');
  const prometheus = program(env, 'PROMETHEUS_BIN', 'prometheus');
  const promtool = program(env, 'PROMTOOL_BIN', 'promtool');
  return [
    {
      name: 'nats-server 2.9+',
      usedBy: 'every test that runs NATS (services, the bus, triad up)',
      apt: ['nats-server'],
      check: () => versionOf(nats.bin, ['--version'], /v?(\d+\.\d+\.\d+)/, '2.9.0', nats.variable),
    },
    {
      name: 'prometheus 2.42+',
      usedBy: 'the monitoring tests (tools/monitoring), which evaluate the rules and dashboards in it',
      apt: ['prometheus'],
      after: 'sudo systemctl disable --now prometheus   # the tests start their own',
      check: () => versionOf(prometheus.bin, ['--version'], /version (\d+\.\d+\.\d+)/, '2.42.0', prometheus.variable),
    },
    {
      name: 'promtool 2.42+',
      usedBy: 'the monitoring tests (promtool check/test rules, check metrics)',
      apt: ['prometheus'],
      check: () => versionOf(promtool.bin, ['--version'], /version (\d+\.\d+\.\d+)/, '2.42.0', promtool.variable),
    },
    {
      name: 'zmq and msgpack in /usr/bin/python3',
      usedBy: 'the KV-event interop test (libs/kv-events), which publishes with the libraries vLLM and SGLang use',
      apt: ['python3-zmq', 'python3-msgpack'],
      check: () => {
        const r = spawnSync('/usr/bin/python3', ['-c', 'import zmq, msgpack'], { encoding: 'utf8', timeout: 20_000 });
        if (r.error) return { problem: r.error.code === 'ENOENT' ? '/usr/bin/python3 is not installed' : r.error.message };
        if (r.status !== 0) return { problem: (r.stderr.trim().split('\n').at(-1) ?? 'import failed').trim() };
        return { version: 'ok' };
      },
    },
    {
      name: 'kubectl 1.21+ (its built-in kustomize reads Components)',
      usedBy: 'the manifest tests (tools/manifests), which build every kustomization',
      other: 'https://kubernetes.io/docs/tasks/tools/install-kubectl-linux/ (Debian bookworm ships kubectl 1.20 only)',
      check: () => versionOf('kubectl', ['version', '--client'], /Client Version: v?(\d+\.\d+\.\d+)/, '1.21.0', undefined),
    },
  ];
}

/** The prerequisites that are missing, each with why. */
export function missingPrerequisites(env = process.env) {
  return prerequisites(env)
    .map((p) => ({ ...p, result: p.check() }))
    .filter((p) => p.result.problem !== undefined)
    .map(({ check: _check, result, ...p }) => ({ ...p, problem: result.problem }));
}

/** One report of everything missing and the commands that install it (empty when nothing is). */
export function renderMissing(missing) {
  if (missing.length === 0) return '';
  const lines = ['npm test needs these, and this machine lacks them:'];
  for (const m of missing) lines.push(`  - ${m.name}: ${m.problem}. Used by ${m.usedBy}.`);
  const apt = [...new Set(missing.flatMap((m) => m.apt ?? []))];
  const after = [...new Set(missing.flatMap((m) => (m.after ? [m.after] : [])))];
  const other = missing.filter((m) => m.other);
  lines.push('Install them:');
  if (apt.length > 0) lines.push(`  sudo apt-get install -y --no-install-recommends ${apt.join(' ')}   # Debian/Ubuntu`);
  for (const a of after) lines.push(`  ${a}`);
  for (const m of other) lines.push(`  ${m.name}: ${m.other}`);
  const variables = missing.filter((m) => /^[A-Z_]+=/.test(m.problem));
  if (variables.length > 0) lines.push('  or fix or unset the variables named above (they point at a program that is not there)');
  return `${lines.join('\n')}\n`;
}
