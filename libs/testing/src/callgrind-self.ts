import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// For micro-benchmarks that count one piece of code's instructions: the benchmark file runs itself again under
// valgrind's callgrind (with `--child` and its own arguments), counting off until the child turns it on with
// `callgrindControl(['--instr=on', pid])`, and dumps with `--dump`; the parent reads the main thread's count.

/** Runs `callgrind_control` with `args` (from the process being counted: `--instr=on|off`, `--zero`, `--dump`). */
export function callgrindControl(args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('callgrind_control', args, { stdio: 'ignore' });
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`callgrind_control ${args.join(' ')}: exit ${code}`))));
  });
}

/**
 * Runs `file` under tsx and callgrind with `--child` and `childArgs`, and returns the instructions its main thread
 * counted in its first dump, with what it printed.
 */
export function countSelfUnderCallgrind(
  file: string,
  childArgs: readonly string[],
): { readonly instructions: number; readonly stdout: string } {
  const dir = mkdtempSync(join(tmpdir(), 'triad-callgrind-self-'));
  try {
    const run = spawnSync(
      'valgrind',
      [
        '--tool=callgrind',
        '--instr-atstart=no',
        '--smc-check=all-non-file',
        '--separate-threads=yes',
        `--callgrind-out-file=${dir}/cg.%p`,
        '-q',
        process.execPath,
        '--import',
        'tsx',
        file,
        '--child',
        ...childArgs,
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
    );
    if (run.status !== 0) throw new Error(`valgrind exited ${run.status}`);
    // The main thread (thread 01), first dump.
    const dump = readdirSync(dir).find((f) => /^cg\.\d+\.1-01$/.test(f));
    if (dump === undefined) throw new Error(`no main-thread dump in ${dir}`);
    const instructions = Number(/^(?:totals|summary): (\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'))?.[1]);
    return { instructions, stdout: run.stdout };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
