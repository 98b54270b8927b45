import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

// What a user reads when a flag or a file is wrong: the real CLI, one `error:` line naming the flag and what it
// accepts, exit code 1, no help dump and no stack trace. Every case fails before anything is started.

const cli = join(__dirname, '../bin/triad.js');

function triad(args: readonly string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stderr: string; stdout: string } {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

describe('CLI errors', () => {
  it.each([
    [
      'up --sim-latency fast',
      ['up', '--sim-latency', 'fast'],
      "error: option '--sim-latency <profile>' argument 'fast' is invalid. Allowed choices are realistic, zero.",
    ],
    [
      'up --ready-timeout soon',
      ['up', '--ready-timeout', 'soon'],
      "error: option '--ready-timeout <duration>' argument 'soon' is invalid. expected a duration such as 500ms, 10s or 1m30s " +
        "(a bare number is seconds), got 'soon'.",
    ],
    [
      'up --port x',
      ['up', '--port', 'x'],
      "error: option '--port <port>' argument 'x' is invalid. expected a whole number from 1 to 65535.",
    ],
  ])('%s: one error line and where the options are, not the whole help', (_name, args, line) => {
    const r = triad(args);
    expect(r.status).toBe(1);
    expect(r.stderr.split('\n')).toEqual([line, '(run `triad up --help` for the options)', '']);
    expect(r.stdout).toBe('');
  });

  it('gateway --body-limit with a unit it does not know names the flag and the accepted forms', () => {
    const r = triad(['gateway', '--body-limit', '10XB']);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      "error: invalid gateway settings: --body-limit: expected a size such as 10MiB, 512KiB or 1GB (a bare number is bytes), got '10XB'\n",
    );
  });

  it('a duration from the environment is read with units and named by its variable when wrong', () => {
    const r = triad(['pod-watcher', '--source', 'file:/dev/null'], { TRIAD_SCRAPE_INTERVAL_MS: 'often' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      'error: invalid pod-watcher settings: TRIAD_SCRAPE_INTERVAL_MS: expected a duration such as 500ms, 10s or 1m30s ' +
        "(a bare number is milliseconds), got 'often'",
    );
  });

  it('scheduler --config with a missing file says so, not a bare ENOENT', () => {
    const r = triad(['scheduler', '--config', '/nonexistent/scheduler.yaml']);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe("error: invalid scheduler settings: --config: cannot read '/nonexistent/scheduler.yaml': no such file\n");
  });

  it('an unknown option is one commander error line', () => {
    const r = triad(['scheduler', '--bogus']);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe("error: unknown option '--bogus'\n");
  });

  it('triad up with a missing config names the file', () => {
    const r = triad(['up', '--config', '/nonexistent/cluster.yaml']);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('error: triad up: config file /nonexistent/cluster.yaml does not exist (pass one with --config FILE)\n');
  });
});
