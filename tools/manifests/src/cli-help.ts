import { execFile } from 'node:child_process';
import { join } from 'node:path';

/** What `triad <command> --help` says: the flags it accepts, or why it could not be asked. */
export type CommandHelp = { readonly ok: true; readonly flags: ReadonlySet<string> } | { readonly ok: false; readonly error: string };

/** Runs `triad <command> --help` from the workspace's own CLI and collects every `--flag` it lists. */
export function commandHelp(workspaceRoot: string, command: string): Promise<CommandHelp> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(workspaceRoot, 'apps/cli/bin/triad.js'), command, '--help'],
      { timeout: 60_000, cwd: workspaceRoot },
      (err, stdout, stderr) => {
        // A command that prints its usage but exits non-zero still tells us its flags.
        if (err && !stdout.includes('Usage:')) {
          resolve({
            ok: false,
            error: `\`triad ${command} --help\` failed (${err.code ?? err.signal ?? err.message}): ${String(stderr || stdout)
              .trim()
              .split('\n')
              .slice(-3)
              .join(' / ')}`,
          });
          return;
        }
        resolve({ ok: true, flags: new Set(stdout.match(/--[a-z][a-z0-9-]*/g) ?? []) });
      },
    );
  });
}

/** The help of several commands, asked in parallel. */
export async function commandsHelp(workspaceRoot: string, commands: Iterable<string>): Promise<Map<string, CommandHelp>> {
  const names = [...new Set(commands)];
  const answers = await Promise.all(names.map((c) => commandHelp(workspaceRoot, c)));
  return new Map(names.map((c, i) => [c, answers[i]]));
}

/** The commands `triad --help` lists (its own and the ones that take their own flags). */
export function cliCommands(workspaceRoot: string): Promise<Set<string>> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [join(workspaceRoot, 'apps/cli/bin/triad.js'), '--help'],
      { timeout: 60_000, cwd: workspaceRoot },
      (err, stdout) => {
        if (err) reject(err);
        else resolve(new Set([...stdout.matchAll(/^ {2}([a-z][a-z-]*)\b/gm)].map((m) => m[1]).filter((c) => c !== 'help')));
      },
    );
  });
}
