// vLLM's reference EPD proxies as comparison targets for the gateway benchmark, in front of the same E/P/D
// engine-sims as the gateway's EPD case. Their code is not part of this repository: the caller passes paths to
// copies (see docs/reference-proxies.md):
//   - classic: examples/online_serving/disaggregated_encoder/disagg_epd_proxy.py at 7e4cd77 (--reference-proxy,
//     TRIAD_BENCH_REFERENCE_PROXY): one encode per item with max_tokens 1, raw media to P and D;
//   - newest: examples/disaggregated/disaggregated_encoder/disagg_epd_proxy.py (--reference-proxy-newest,
//     TRIAD_BENCH_REFERENCE_PROXY_NEWEST): images batched per encoder, metadata-only *_embeds to P and D, the
//     encoder's EC handles passed on. It runs on stand-ins for msgspec and pydantic 2 (reference_proxy.py).
// Each runs twice: as shipped (its own __main__ and logging, to a file) and quiet (loaded as a module, `proxy`
// logger at WARNING, no access log).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startReferenceProxy, type ReferenceProxyProcess } from './reference-proxy-process';

export const REFERENCE_HINT =
  'vLLM reference EPD proxy comparison skipped: pass --reference-proxy <classic disagg_epd_proxy.py> and/or ' +
  '--reference-proxy-newest <newest copy> (or TRIAD_BENCH_REFERENCE_PROXY / TRIAD_BENCH_REFERENCE_PROXY_NEWEST); ' +
  'see docs/reference-proxies.md.';

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

export interface ReferenceScripts {
  readonly classic?: string;
  readonly newest?: string;
}

/**
 * Starts each given script as shipped and quiet in front of the given encode, prefill and decode engine URLs; with
 * `cpus`, on those CPUs only (the routers of a pinned run share them).
 */
export async function startReferenceProxies(
  scripts: ReferenceScripts,
  stages: { encode: string; prefill: string; decode: string },
  cpus?: string,
): Promise<ReferenceProxies> {
  const logDir = mkdtempSync(join(tmpdir(), 'triad-bench-refproxy-'));
  const procs: ReferenceProxyProcess[] = [];
  const targets: ReferenceTarget[] = [];
  const close = async () => {
    await Promise.all(procs.map((p) => p.close()));
    rmSync(logDir, { recursive: true, force: true });
  };
  try {
    for (const [version, script] of [
      ['classic', scripts.classic],
      ['newest', scripts.newest],
    ] as const) {
      if (!script) continue;
      for (const mode of ['shipped', 'quiet'] as const) {
        const target = `vLLM reference EPD proxy, ${version} (${mode === 'shipped' ? 'as shipped' : 'quiet'})`;
        const proc = await startReferenceProxy({
          script,
          mode,
          encode: [stages.encode],
          prefill: [stages.prefill],
          decode: [stages.decode],
          logDir,
          name: `${version}-${mode}`,
          ...(cpus !== undefined ? { cpus } : {}),
        });
        procs.push(proc);
        targets.push({ target, url: `${proc.url}/v1/chat/completions`, cpuSeconds: proc.cpuSeconds });
      }
    }
    return { targets, close };
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
 * The EPD baselines at 1 connection (gateway.ts): `sameWork`, the p50 of the same E→P→D sent directly one request at
 * a time (the stages pull what they pull behind a router); `replayed`, the old sum of each stage's body without the
 * hand-offs replayed by wrk.
 */
export interface StageBaselines {
  readonly sameWork: number;
  readonly replayed: number;
}

/**
 * The issue-10 comparison: Triad EPD throughput over each reference variant's at `conns` connections, and at 1
 * connection each one's p50 minus the same E→P→D sent directly (and, for comparison, minus the old baseline).
 */
export function referenceSummary(
  triad: { many?: Measured; one?: Measured },
  refs: readonly { target: string; many?: Measured; one?: Measured }[],
  conns: number,
  base: StageBaselines,
  label = 'Triad EPD',
): string {
  const lines: string[] = [];
  const added = (m: Measured | undefined) =>
    m ? `${(m.p50ms - base.sameWork).toFixed(3)} ms (old figure ${(m.p50ms - base.replayed).toFixed(3)} ms)` : '–';
  for (const r of refs) {
    const ratio = triad.many && r.many ? `${(triad.many.rps / r.many.rps).toFixed(2)}×` : '–';
    lines.push(
      `${label} ÷ ${r.target} at ${conns} connections: ${ratio} req/s; at 1 connection it adds ${added(r.one)} over the stages sent directly.`,
    );
  }
  lines.push(
    `${label} at 1 connection adds ${added(triad.one)} over the stages sent directly (${base.sameWork.toFixed(3)} ms; old: ${base.replayed.toFixed(3)} ms).`,
  );
  return `${lines.join('\n')}\n`;
}
