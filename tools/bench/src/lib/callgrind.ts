import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The launcher that runs a gateway's node under callgrind with instrumentation off: start-up and warm-up run
 * uncounted (`callgrindControl(['--instr=on', pid])` starts counting); JIT-compiled code is re-translated (smc-check).
 * `separateThreads`: one dump file per thread, so the main thread (JavaScript, the event loop) can be counted apart
 * from V8's background threads (the optimizing compiler's concurrent jobs, GC helpers) and libuv's pool.
 */
export function callgrindLauncher(dir: string, separateThreads = false): string[] {
  return [
    'valgrind',
    '--tool=callgrind',
    '--instr-atstart=no',
    '--smc-check=all-non-file',
    ...(separateThreads ? ['--separate-threads=yes'] : []),
    `--callgrind-out-file=${dir}/cg.%p`,
    '-q',
  ];
}

export function callgrindControl(args: readonly string[]): void {
  const r = spawnSync('callgrind_control', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`callgrind_control ${args.join(' ')}: ${r.stderr || r.stdout}`);
}

/** Dumps the counters of `pid` and returns each new dump file's instructions since the last zeroing. */
function dumpTotals(pid: number, dir: string): { readonly file: string; readonly instructions: number }[] {
  const before = new Set(readdirSync(dir));
  callgrindControl(['--dump', String(pid)]);
  return readdirSync(dir)
    .filter((f) => !before.has(f) && f.startsWith(`cg.${pid}`))
    .map((file) => {
      const totals = /^(?:totals|summary): (\d+)/m.exec(readFileSync(join(dir, file), 'utf8'));
      if (!totals) throw new Error(`no totals in ${file}`);
      return { file, instructions: Number(totals[1]) };
    });
}

/** Dumps the counters of `pid` and returns the instructions since the last zeroing (the newest dump's totals). */
export function dumpInstructions(pid: number, dir: string): number {
  const fresh = dumpTotals(pid, dir);
  if (fresh.length !== 1) throw new Error(`expected one new callgrind dump, found ${fresh.map((d) => d.file).join(', ') || 'none'}`);
  return fresh[0].instructions;
}

/** Instructions since the last zeroing: all threads, and the main thread alone. */
export interface ThreadInstructions {
  readonly total: number;
  readonly main: number;
}

/**
 * Dumps the counters of `pid`, launched with `separateThreads`, and sums the new per-thread dumps
 * (`cg.<pid>.<n>-<thread>`; thread 01 is the main thread).
 */
export function dumpThreadInstructions(pid: number, dir: string): ThreadInstructions {
  const fresh = dumpTotals(pid, dir);
  const main = fresh.find((d) => d.file.endsWith('-01'));
  if (main === undefined) throw new Error(`no main-thread dump among ${fresh.map((d) => d.file).join(', ') || 'none'}`);
  return { total: fresh.reduce((sum, d) => sum + d.instructions, 0), main: main.instructions };
}
