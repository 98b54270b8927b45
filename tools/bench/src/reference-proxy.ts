// vLLM's reference EPD proxy (examples/online_serving/disaggregated_encoder/disagg_epd_proxy.py) as a comparison
// target for the gateway benchmark, in front of the same E/P/D engine-sims as the gateway's EPD case. Its code is
// not part of this repository: the caller passes a path to a copy (--reference-proxy, TRIAD_BENCH_REFERENCE_PROXY).
// It runs under /usr/bin/python3 (Debian: python3-fastapi python3-aiohttp python3-uvicorn python3-uvloop;
// TRIAD_BENCH_PYTHON overrides) twice:
//   - as shipped: `python3 disagg_epd_proxy.py …`, DEBUG logging and uvicorn's access log written to a file;
//   - quiet: the same module loaded by path, `proxy` logger at WARNING, uvicorn with access_log=False.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from '@triad/testing';

const PYTHON = process.env['TRIAD_BENCH_PYTHON'] ?? '/usr/bin/python3';

// Both variants start through `python3 -c`: the child asks the kernel to SIGKILL it when the benchmark dies
// (PR_SET_PDEATHSIG, kept across exec), so a killed benchmark leaves no proxy behind.
const DIE_WITH_PARENT = 'import ctypes, signal; ctypes.CDLL(None).prctl(1, signal.SIGKILL)';
// As shipped: exec the script itself, unchanged, with its own command line.
const SHIPPED = `${DIE_WITH_PARENT}
import os, sys
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])`;
// Quiet: what the script's __main__ does, minus the per-request logging. argv: script port e_url p_url d_url.
const QUIET = `${DIE_WITH_PARENT}
import importlib.util, logging, sys, uvicorn
spec = importlib.util.spec_from_file_location('disagg_epd_proxy', sys.argv[1])
proxy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(proxy)
logging.getLogger('proxy').setLevel(logging.WARNING)
proxy.app.state.e_urls, proxy.app.state.p_urls, proxy.app.state.d_urls = [sys.argv[3]], [sys.argv[4]], [sys.argv[5]]
uvicorn.run(proxy.app, host='127.0.0.1', port=int(sys.argv[2]), log_level='warning', loop='uvloop', access_log=False)`;

export const REFERENCE_HINT =
  'vLLM reference EPD proxy comparison skipped: pass --reference-proxy <path to disagg_epd_proxy.py> (or set ' +
    'TRIAD_BENCH_REFERENCE_PROXY); see docs/gateway.md, Benchmark.';

/** One running reference proxy. */
export interface ReferenceTarget {
  readonly target: string;
  readonly url: string;
  /** CPU seconds (user + system) the proxy process has used so far. */
  cpuSeconds(): number;
}

export interface ReferenceProxies {
  readonly targets: readonly ReferenceTarget[];
  close(): Promise<void>;
}

function cpuSecondsOf(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/** Starts the shipped and the quiet variant in front of the given encode, prefill and decode engine URLs. */
export async function startReferenceProxies(
  script: string, stages: { encode: string; prefill: string; decode: string },
): Promise<ReferenceProxies> {
  const logDir = mkdtempSync(join(tmpdir(), 'triad-bench-refproxy-'));
  const procs: ChildProcess[] = [];
  const killAll = () => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  };
  process.once('exit', killAll);
  const close = async () => {
    process.off('exit', killAll);
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGTERM');
    await Promise.all(procs.map((p) => (p.exitCode === null && p.signalCode === null ? new Promise((r) => p.once('exit', r)) : undefined)));
    rmSync(logDir, { recursive: true, force: true });
  };
  const start = async (target: string, file: string, args: (port: number) => string[]): Promise<ReferenceTarget> => {
    const port = await freePort();
    // A file, not a pipe: a pipe nobody drains would block the proxy, and /dev/null is cheaper than any real log.
    const log = join(logDir, file);
    const fd = openSync(log, 'w');
    const proc = spawn(PYTHON, args(port), { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    procs.push(proc);
    const url = `http://127.0.0.1:${port}`;
    const died = new Promise<never>((_, reject) =>
      proc.once(
        'exit', (code, signal) => reject(new Error(`${target} exited (${code ?? signal}): ${readFileSync(log, 'utf8').slice(-2000)}`)),
      ),
    );
    const ready = waitFor(
      () => fetch(`${url}/health`).then((r) => r.ok, () => false), { timeoutMs: 30_000, intervalMs: 200, what: `${target} ready` },
    );
    await Promise.race([ready, died]);
    return { target, url: `${url}/v1/chat/completions`, cpuSeconds: () => cpuSecondsOf(proc.pid) };
  };
  try {
    const shipped = await start('vLLM reference EPD proxy (as shipped)', 'shipped.log', (port) => [
      '-c', SHIPPED, script, '--host', '127.0.0.1', '--port', String(port),
      '--encode-servers-urls', stages.encode, '--prefill-servers-urls', stages.prefill, '--decode-servers-urls', stages.decode,
    ]);
    const quiet = await start(
      'vLLM reference EPD proxy (quiet)', 'quiet.log',
      (port) => ['-c', QUIET, script, String(port), stages.encode, stages.prefill, stages.decode],
    );
    return { targets: [shipped, quiet], close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A measurement the summary needs: req/s and p50 of one target at one connection count. */
export interface Measured {
  readonly rps: number;
  readonly p50ms: number;
}

/**
 * The issue-10 comparison: Triad EPD throughput over each reference variant's at `conns` connections, and at 1
 * connection each one's p50 minus the sum of the three direct stage p50s.
 */
export function referenceSummary(
  triad: { many?: Measured; one?: Measured }, refs: readonly { target: string; many?: Measured; one?: Measured }[], conns: number,
  stageSumMs: number, label = 'Triad EPD',
): string {
  const lines: string[] = [];
  const added = (m: Measured | undefined) => (m ? `${(m.p50ms - stageSumMs).toFixed(3)} ms` : '–');
  for (const r of refs) {
    const ratio = triad.many && r.many ? `${(triad.many.rps / r.many.rps).toFixed(2)}×` : '–';
    lines.push(`${label} ÷ ${r.target} at ${conns} connections: ${ratio} req/s; at 1 connection it adds ${added(r.one)} over the ` +
      `direct stages.`);
  }
  lines.push(`${label} at 1 connection adds ${added(triad.one)} over the direct stages (sum ${stageSumMs.toFixed(3)} ms).`);
  return `${lines.join('\n')}\n`;
}
