// What a benchmark reads of one process from Linux /proc: its CPU time, memory and system-call counts.
import { readFileSync } from 'node:fs';

/** Clock ticks per second (USER_HZ, the unit of utime and stime in /proc/<pid>/stat): 100 on Linux. */
const CLOCK_TICKS = 100;

/** CPU seconds (user + system) the process has used so far; NaN when it is unknown or gone. */
export function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces: the fields after it start past its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}

/** CPU seconds, resident memory and its peak (MB) of a running process. */
export function procStats(pid: number): { cpuS: number; rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { cpuS: cpuSeconds(pid), rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

/**
 * Read- and write-family system calls (read, readv… / write, writev…, what libuv uses on TCP sockets and pipes; not
 * sendmsg or epoll) the process has made so far (`syscr`, `syscw` of /proc/<pid>/io, every thread): counts without
 * slowing it as strace does. NaN when unknown.
 */
export function ioSyscalls(pid: number | undefined): { reads: number; writes: number } {
  if (pid === undefined) return { reads: NaN, writes: NaN };
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const count = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(io)?.[1] ?? NaN);
    return { reads: count('syscr'), writes: count('syscw') };
  } catch {
    return { reads: NaN, writes: NaN };
  }
}
