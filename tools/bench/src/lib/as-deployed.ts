/**
 * Runs a benchmarked service the way its Kubernetes Deployment runs it, as far as memory goes: with the container's
 * NODE_OPTIONS, and inside a memory cgroup with the container's limit. Node sizes its V8 heap from that limit
 * (about half of it), and V8 lets the heap grow far less past its live size under a small heap limit than on a
 * 24 GB machine; so an RSS measured without the limit says little about the pod.
 *
 * The cgroup needs root and a writable cgroup file system (v2 `memory.max` or v1 `memory.limit_in_bytes`). Where
 * that is not available the heap is sized with `--max-old-space-size` as Node would size it, and the report says so.
 */
import { mkdirSync, readFileSync, rmdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export interface ContainerMemory {
  /** `resources.limits.memory` in bytes. */
  readonly limitBytes: number;
  /** NODE_OPTIONS from the container's `env`, split into flags ([] when unset). */
  readonly nodeOptions: string[];
}

const UNITS: Readonly<Record<string, number>> = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, K: 1e3, M: 1e6, G: 1e9, '': 1 };

/** A Kubernetes quantity (`512Mi`, `1G`, `1073741824`) in bytes. */
export function quantityBytes(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G|)$/.exec(q.trim());
  if (!m) throw new Error(`not a memory quantity: ${q}`);
  return Math.round(Number(m[1]) * UNITS[m[2]]);
}

/** The memory limit and NODE_OPTIONS of `container` in the Deployment `name` of a manifest file. */
export function containerMemory(manifest: string, name: string, container: string): ContainerMemory {
  for (const doc of parseAllDocuments(readFileSync(manifest, 'utf8'))) {
    const d = doc.toJS() as {
      kind?: string;
      metadata?: { name?: string };
      spec?: {
        template?: {
          spec?: {
            containers?: { name: string; resources?: { limits?: { memory?: string } }; env?: { name: string; value?: string }[] }[];
          };
        };
      };
    } | null;
    if (d?.kind !== 'Deployment' || d.metadata?.name !== name) continue;
    const c = d.spec?.template?.spec?.containers?.find((x) => x.name === container);
    const limit = c?.resources?.limits?.memory;
    if (!c || !limit) throw new Error(`${manifest}: Deployment ${name} has no container ${container} with a memory limit`);
    const options = c.env?.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '';
    return { limitBytes: quantityBytes(limit), nodeOptions: options.split(/\s+/).filter(Boolean) };
  }
  throw new Error(`${manifest}: no Deployment ${name}`);
}

/** A memory cgroup a child process can join, or undefined when this machine does not let us make one. */
export interface MemoryCgroup {
  /** The file a process id is written to, to move that process into the cgroup. */
  readonly procsFile: string;
  remove(): void;
}

/** Makes a memory cgroup limited to `limitBytes` (v2, else v1); undefined when not permitted. */
export function makeMemoryCgroup(name: string, limitBytes: number): MemoryCgroup | undefined {
  const candidates = [
    { dir: join('/sys/fs/cgroup', name), limitFile: 'memory.max', root: '/sys/fs/cgroup/cgroup.controllers' },
    { dir: join('/sys/fs/cgroup/memory', name), limitFile: 'memory.limit_in_bytes', root: '/sys/fs/cgroup/memory/tasks' },
  ];
  for (const c of candidates) {
    if (!existsSync(c.root)) continue;
    try {
      mkdirSync(c.dir);
    } catch {
      continue;
    }
    try {
      writeFileSync(join(c.dir, c.limitFile), String(limitBytes));
      return {
        procsFile: join(c.dir, 'cgroup.procs'),
        remove: () => {
          try {
            rmdirSync(c.dir);
          } catch {
            // Still has a process (it is killed with the benchmark); left for the system to clean.
          }
        },
      };
    } catch {
      rmdirSync(c.dir);
    }
  }
  return undefined;
}

/**
 * The command that runs `node <args>` in `cgroup`: a shell moves itself into the cgroup and then becomes node, so
 * the process measured is node itself (same pid) and everything it allocates counts against the limit.
 */
export function inCgroup(cgroup: MemoryCgroup, node: string, args: readonly string[]): { command: string; args: string[] } {
  return { command: '/bin/sh', args: ['-c', `echo $$ > '${cgroup.procsFile}' && exec "$0" "$@"`, node, ...args] };
}

/** What Node would pick as the V8 heap limit under a memory limit of `limitBytes` (about half), in MB. */
export function nodeHeapMbFor(limitBytes: number): number {
  return Math.floor(limitBytes / 2 / 1024 / 1024);
}
