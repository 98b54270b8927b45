// One running copy of vLLM's reference EPD proxy, started through tools/bench/python/reference_proxy.py (which
// installs the msgspec / pydantic stand-ins Debian 12 needs for the newest proxy; see docs/reference-proxies.md).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort, waitFor } from '@triad/testing';
import { cpuSeconds } from './lib/proc';

const PYTHON = process.env['TRIAD_BENCH_PYTHON'] ?? '/usr/bin/python3';
const LAUNCHER = resolve(__dirname, '../python/reference_proxy.py');

export interface ReferenceProxySpec {
  /** Path of a copy of `disagg_epd_proxy.py` (not part of this repository). */
  readonly script: string;
  /** `shipped`: the script's own __main__ and logging; `quiet`: loaded as a module without per-request logs. */
  readonly mode: 'shipped' | 'quiet';
  readonly encode: readonly string[];
  /** Empty for E→PD. */
  readonly prefill: readonly string[];
  readonly decode: readonly string[];
  /** Mooncake EC consumers (E→PD only): one `tcp://host:port` per decode server × DP replica, replica-major. */
  readonly ecConsumerZmqAddrs?: readonly string[];
  readonly ecConsumerDpSize?: number;
  /** Where its output goes (a file, not a pipe: a pipe nobody drains would block the proxy). */
  readonly logDir: string;
  readonly name: string;
}

export interface ReferenceProxyProcess {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** CPU seconds (user + system) the proxy process has used so far. */
  cpuSeconds(): number;
  /** The tail of its log. */
  log(): string;
  close(): Promise<void>;
}

function running(proc: ChildProcess): boolean {
  return proc.exitCode === null && proc.signalCode === null;
}

/** Starts one proxy and resolves once its /health answers (it probes the stages, so they must be up). */
export async function startReferenceProxy(spec: ReferenceProxySpec): Promise<ReferenceProxyProcess> {
  const port = await freePort();
  const logPath = join(spec.logDir, `${spec.name}.log`);
  const fd = openSync(logPath, 'w');
  const args = [
    LAUNCHER,
    '--script',
    spec.script,
    '--mode',
    spec.mode,
    '--port',
    String(port),
    '--encode',
    spec.encode.join(','),
    '--prefill',
    spec.prefill.join(','),
    '--decode',
    spec.decode.join(','),
    ...(spec.ecConsumerZmqAddrs?.length
      ? ['--ec-consumer-zmq-addrs', spec.ecConsumerZmqAddrs.join(','), '--ec-consumer-dp-size', String(spec.ecConsumerDpSize ?? 1)]
      : []),
  ];
  const proc = spawn(PYTHON, args, { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const kill = () => {
    if (running(proc)) proc.kill('SIGKILL');
  };
  process.once('exit', kill);
  const log = () => {
    try {
      return readFileSync(logPath, 'utf8').slice(-3000);
    } catch {
      return '';
    }
  };
  const close = async () => {
    process.off('exit', kill);
    if (!running(proc)) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  };
  const url = `http://127.0.0.1:${port}`;
  const died = new Promise<never>((_, reject) => {
    proc.once('exit', (code, signal) => reject(new Error(`${spec.name} exited (${code ?? signal}): ${log()}`)));
  });
  died.catch(() => undefined);
  try {
    const healthy = () =>
      fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      );
    const ready = waitFor(healthy, { timeoutMs: 30_000, intervalMs: 200, what: `${spec.name} ready` });
    await Promise.race([ready, died]);
  } catch (err) {
    await close();
    throw err;
  }
  return { url, cpuSeconds: () => cpuSeconds(proc.pid), log, close };
}
