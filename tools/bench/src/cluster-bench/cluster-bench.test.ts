import { WORKLOADS } from '../cluster-sim/workload';
import { runCell } from './cell';
import { workloadRequests } from './load';

// One tiny cell of the cluster benchmark on the real services (nats-server, triad pod-watcher / scheduler /
// gateway, engine-sims with the engine-core model): a PD pool of 1 prefill + 1 decode pod serving RAG prompts of
// 2k–4k tokens, long enough that per-request disaggregation runs the prefill leg.
describe('cluster benchmark harness (real services)', () => {
  it('runs a PD cell end to end: prefill legs ran, KV pulled, caches and CPU measured', async () => {
    const workload = WORKLOADS.rag;
    const capacity = 6;
    const requests = workloadRequests(workload, 3, 0.5 * capacity, 30);
    const cell = await runCell({
      pool: 'pd',
      workload,
      policy: 'least-request',
      load: 0.5,
      capacity,
      engines: 2,
      timeScale: 2,
      requests,
      warmup: 0.2,
      scrapeIntervalMs: 500,
      net: 90,
    });
    expect(cell.measured).toBe(24);
    expect(cell.failed).toBe(0);
    expect(Number.isFinite(cell.ttftP50)).toBe(true);
    expect(cell.ttftP99).toBeGreaterThanOrEqual(cell.ttftP50);
    // The prefill pod computed prompts and the decode pod pulled their KV.
    expect(cell.prefillLegs).toBeGreaterThan(0);
    expect(cell.kvPulls).toBeGreaterThan(0);
    // Every RAG prompt starts with the same system prompt: the prefill pod's prefix cache hits it.
    expect(cell.prefixHit).toBeGreaterThan(0);
    expect(cell.prefixHit).toBeLessThan(1);
    expect(cell.cores.gateway).toBeGreaterThan(0);
    expect(cell.routerCpuMsPerRequest).toBeGreaterThan(0);
  }, 240_000);
});
