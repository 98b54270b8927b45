import { Buckets, OutlierRecordSchema, endpointKey, outlierKey } from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { MATRIX_MODEL, TOPOLOGY_NAMES, runFaultScenario, scenarioLabel, scenariosOf } from '@triad/testing/reliability';
import { NS } from '../support/harness';
import { matrixStack, unexpectedErrors, useMatrixGateway } from './support/matrix-stack';

// Fault injection per stage and per pod (issue 16): in aggregated, PD and EPD (vLLM; SGLang aggregated and PD),
// pod 0 of one stage answers 500, resets the connection, hangs past the stage budget, resets half-way through its
// answer, or (the final stage) fails inside the stream it opened, for every request it gets. Requests go through the gateway's real scheduling code (in-process) to
// engine-sims on real sockets. Every request must succeed, on the healthy pod of that stage, with no engine getting
// the same leg twice. tools/bench/src/reliability.ts runs the same scenarios with more load and a baseline.

const REQUESTS = 8;

describe('reliability: one of two pods per stage failing, in every mode', () => {
  const matrix = useMatrixGateway(TOPOLOGY_NAMES, 40);

  it.each(TOPOLOGY_NAMES)(
    '%s: 0 failed requests, retries reach the healthy pod, no leg sent twice to one engine',
    async (name) => {
      const topo = matrix.topology(name);
      for (const scenario of scenariosOf(name, 'resilient')) {
        const r = await runFaultScenario(matrixStack(matrix.h), topo, scenario, {
          requests: REQUESTS,
          concurrency: 2,
          // The healthy pod's legs must fit it too: 1 s was missed on a loaded machine (504s, then retries landing
          // on the failing pod, 502s). A hanging pod costs this per leg until it is ejected.
          stageTimeout: '4s',
          consecutiveErrors: 2,
          tag: 't',
        });
        const got = { scenario: scenarioLabel(scenario), failed: r.failed, failures: r.failures, duplicated: r.duplicated };
        expect(got).toEqual({ scenario: scenarioLabel(scenario), failed: 0, failures: {}, duplicated: 0 });
        // The failing pod was chosen (the fault was exercised), the gateway retried, and the healthy pod served.
        expect(r.faultyLegs).toBeGreaterThan(0);
        expect(r.retries).toBeGreaterThanOrEqual(r.faultyLegs > 0 ? 1 : 0);
        expect(r.servedByHealthy).toBeGreaterThan(0);
      }
      expect(await unexpectedErrors(matrix.h)).toBe(0);
      expect(matrix.rejections).toEqual([]);
    },
    600_000,
  );

  // Regression: a reset half-way through a 200 answer was not counted as the engine's failure, so a pod that died
  // mid-answer every time was never ejected and every request paid a retry.
  it('ejects a pod that resets every answer half-way through (reason reset)', async () => {
    const [bad, good] = matrix.topology('vllm-aggregated').sims.aggregated as readonly [SimEngineHandle, SimEngineHandle];
    await matrix.h.putServer('reset-eject', {
      model: MATRIX_MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'reset-eject' } },
      workloadPort: { port: 8000, protocol: 'http' },
      trafficPolicy: { outlierDetection: { consecutiveErrors: 2, baseEjectionTime: '60s' } },
    });
    await matrix.h.putRoute('reset-eject', {
      modelName: 'reset-eject',
      rules: [{ targetModels: [{ modelServerName: 'reset-eject', weight: 100 }] }],
    });
    const metrics = (kvCacheUsage: number) => ({ running: 0, waiting: 0, kvCacheUsage, scrapedAt: Date.now(), stale: false });
    await matrix.h.putEndpoint('reset-eject', 'bad', 'aggregated', bad, { metrics: metrics(0) });
    await matrix.h.putEndpoint('reset-eject', 'good', 'aggregated', good, { metrics: metrics(0.3) });
    await matrix.h.waitForModel('reset-eject');
    const kv = await matrix.h.bus.kv(Buckets.outliers, OutlierRecordSchema);
    const key = outlierKey(endpointKey(NS, 'reset-eject', 'bad'), 'aggregated');
    bad.setFault({ mode: 'die-mid-stream' });
    try {
      await waitFor(
        async () => {
          const res = await fetch(`${matrix.h.gateway.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'reset-eject', max_tokens: 4, messages: [{ role: 'user', content: 'the same prompt' }] }),
          });
          expect(res.status).toBe(200);
          return (await kv.get(key))?.state === 'ejected';
        },
        { what: 'the resetting pod ejected' },
      );
    } finally {
      bad.setFault({ mode: 'ok' });
    }
    expect(await kv.get(key)).toMatchObject({ state: 'ejected', reason: 'reset' });
  });
});
