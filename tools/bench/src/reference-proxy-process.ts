// One running copy of vLLM's reference EPD proxy, started through tools/bench/python/reference_proxy.py (which
// installs the msgspec / pydantic stand-ins Debian 12 needs for the newest proxy; see docs/reference-proxies.md).
import { join, resolve } from 'node:path';
import { freePort, startLoggedProcess } from '@triad/testing';
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
  /** Run it on these CPUs only (`taskset -c LIST`), as `gateway.ts --gateway-cpus` runs the gateways. */
  readonly cpus?: string;
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

/** Starts one proxy and resolves once its /health answers (it probes the stages, so they must be up). */
export async function startReferenceProxy(spec: ReferenceProxySpec): Promise<ReferenceProxyProcess> {
  const port = await freePort();
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
  const url = `http://127.0.0.1:${port}`;
  // taskset execs the proxy, so the pid whose CPU is read is python's.
  const proxy = await startLoggedProcess({
    name: spec.name,
    command: spec.cpus !== undefined ? 'taskset' : PYTHON,
    args: spec.cpus !== undefined ? ['-c', spec.cpus, PYTHON, ...args] : args,
    logPath: join(spec.logDir, `${spec.name}.log`),
    logTail: 3000,
    pollMs: 200,
    ready: () =>
      fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      ),
  });
  return { url, cpuSeconds: () => cpuSeconds(proxy.process.pid), log: proxy.log, close: proxy.close };
}
