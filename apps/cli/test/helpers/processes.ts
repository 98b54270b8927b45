import { readdirSync, readFileSync } from 'node:fs';

/** pid, parent pid and process group of one process, read from /proc (Linux). */
interface ProcStat {
  readonly pid: number;
  readonly ppid: number;
  readonly pgrp: number;
  readonly state: string;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name sits in parentheses and may itself contain spaces or parentheses: parse after the last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { pid, state: fields[0], ppid: Number(fields[1]), pgrp: Number(fields[2]) };
  } catch {
    return undefined;
  }
}

function allStats(): ProcStat[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map((d) => readStat(Number(d)))
    .filter((s): s is ProcStat => s !== undefined);
}

/** Every live process that descends from `root` or belongs to one of `groups` (zombies do not count). */
export function processesOf(root: number, groups: readonly number[] = []): number[] {
  const stats = allStats().filter((s) => s.state !== 'Z');
  const found = new Set<number>();
  const children = new Map<number, number[]>();
  for (const s of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s.pid]);
  const walk = (pid: number) => {
    for (const c of children.get(pid) ?? []) {
      if (!found.has(c)) {
        found.add(c);
        walk(c);
      }
    }
  };
  walk(root);
  for (const s of stats) if (groups.includes(s.pgrp)) found.add(s.pid);
  return [...found];
}

/** The pids of `pids` that are still alive (not gone and not zombies). */
export function stillAlive(pids: readonly number[]): number[] {
  return pids.filter((pid) => {
    const s = readStat(pid);
    return s !== undefined && s.state !== 'Z';
  });
}
