import { spawnSync } from 'node:child_process';

/** How to get the Prometheus binaries, for the error a test raises when they are missing. */
export const INSTALL_HINT =
  "install Debian's prometheus package (it brings promtool): `apt-get install -y --no-install-recommends prometheus`, " +
  'then stop its system service if the package started one (`systemctl disable --now prometheus`); ' +
  'or put prometheus and promtool 2.42+ on PATH (PROMETHEUS_BIN / PROMTOOL_BIN name other paths)';

/** The path of `prometheus` or `promtool`, checked to run; throws with the install hint when it does not. */
export function requireTool(name: 'prometheus' | 'promtool'): string {
  const variable = name === 'prometheus' ? 'PROMETHEUS_BIN' : 'PROMTOOL_BIN';
  const bin = process.env[variable] || name;
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    const spawnError: NodeJS.ErrnoException | undefined = r.error;
    const missing = spawnError?.code === 'ENOENT';
    const named = process.env[variable] ? `${variable}=${bin}` : undefined;
    const why = r.error
      ? missing
        ? named
          ? `(${named}) does not exist`
          : 'is not on PATH'
        : r.error.message
      : `exited with ${r.status}`;
    throw new Error(`${name} ${why}: the monitoring tests run the real ${name}; ${INSTALL_HINT}`);
  }
  return bin;
}

/** Runs promtool with `args` (and `input` on stdin); returns its exit code and output (stdout and stderr together). */
export function promtool(args: readonly string[], cwd?: string, input?: string): { status: number; output: string } {
  const r = spawnSync(requireTool('promtool'), args, { encoding: 'utf8', cwd, ...(input === undefined ? {} : { input }) });
  return { status: r.status ?? 1, output: `${r.stdout}${r.stderr}` };
}
