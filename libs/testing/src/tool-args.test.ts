import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { toolUsage } from './tool-args';

const fixture = join(__dirname, '__fixtures__/tool-args-cli.ts');
// Run from the fixture's folder, so the usage names the script as `tool-args-cli.ts`.
const run = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', fixture, ...args], { encoding: 'utf8', cwd: join(__dirname, '__fixtures__') });

describe('parseToolArgs', () => {
  it('parses options with their defaults as parseArgs does', () => {
    const out = run('--quick');
    expect(out.status).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual({ duration: '3', quick: true });
  });

  it('prints the options and exits 0 on --help', () => {
    const out = run('--help');
    expect(out.status).toBe(0);
    expect(out.stdout).toBe(
      `${toolUsage('tool-args-cli.ts', { duration: { type: 'string', default: '3' }, quick: { type: 'boolean' } })}\n`,
    );
    expect(out.stdout).toContain('--duration VALUE (default: 3)');
  });

  it('answers an unknown option with one error line and the usage, exit 2, no stack trace', () => {
    const out = run('--durration', '5');
    expect(out.status).toBe(2);
    const [first, second] = out.stderr.split('\n');
    expect(first).toMatch(/^error: Unknown option '--durration'/);
    expect(second).toBe('usage: npx tsx tool-args-cli.ts [options]');
    expect(out.stderr).not.toMatch(/\n\s+at /);
  });

  it('answers a string option given without its value the same way', () => {
    const out = run('--duration');
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/^error: Option '--duration <value>' argument missing/);
  });
});
