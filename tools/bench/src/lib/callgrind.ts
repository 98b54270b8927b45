import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The launcher that runs a gateway's node under callgrind with instrumentation off: start-up and warm-up run
 * uncounted (`callgrindControl(['--instr=on', pid])` starts counting); JIT-compiled code is re-translated (smc-check).
 */
export function callgrindLauncher(dir: string): string[] {
  return ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', `--callgrind-out-file=${dir}/cg.%p`, '-q'];
}

export function callgrindControl(args: readonly string[]): void {
  const r = spawnSync('callgrind_control', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`callgrind_control ${args.join(' ')}: ${r.stderr || r.stdout}`);
}

/** Dumps the counters of `pid` and returns the instructions since the last zeroing (the newest dump's totals). */
export function dumpInstructions(pid: number, dir: string): number {
  const before = new Set(readdirSync(dir));
  callgrindControl(['--dump', String(pid)]);
  const fresh = readdirSync(dir).filter((f) => !before.has(f) && f.startsWith(`cg.${pid}`));
  if (fresh.length !== 1) throw new Error(`expected one new callgrind dump, found ${fresh.join(', ') || 'none'}`);
  const text = readFileSync(join(dir, fresh[0]), 'utf8');
  const totals = /^(?:totals|summary): (\d+)/m.exec(text);
  if (!totals) throw new Error(`no totals in ${fresh[0]}`);
  return Number(totals[1]);
}
