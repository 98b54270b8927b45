/**
 * The reliability suite with more load (issue 16): fault injection per stage and per pod through a `triad gateway`
 * child process (`--scheduling in-process`, the scheduler's own code) to engine-sims on real sockets. In every
 * topology (vLLM aggregated, PD, EPD; SGLang aggregated, PD) each stage has two pods, and pod 0 of one stage fails
 * for every request it gets: a 500, a reset connection, a hang past the stage budget, or a reset half-way through
 * its answer. Each scenario runs twice in the same run: with Triad's defaults (retries on the alternates, outlier
 * ejection) and as the baseline with `retry.attempts: 0` and outlier detection off. Then fuzzed bodies.
 *
 * Reports per scenario: requests sent, failed, duplicated (requests for which one engine received the same leg —
 * same request id and stage — more than once), re-run legs (a stage that had succeeded run again on a healthy pod
 * because a later stage failed), vLLM KV release legs (one-token decodes that free a failed attempt's prefill
 * blocks, docs/kv-ownership.md), retries (`triad_gateway_retries_total`), legs the failing pod got, and the
 * baseline's failures. Streaming requests are every other one, except where the final stage resets mid-answer:
 * bytes already relayed cannot be taken back, so those rows use non-stream requests, and one extra row per
 * topology shows the streaming case.
 *
 * Then phases back to back against the same gateway (reliability-phases.ts, issue 32): the incident pattern and a
 * whole stage down and back per stage and connector, with requests served by a stage fallback counted.
 *
 * Then mid-stream deaths (`runMidStreamDeaths`): the final pod drops every stream after its first token, half-way, or
 * before its last token; with `trafficPolicy.streamResume` the gateway continues each stream on the other pod.
 * Reports resumed streams, duplicated and lost text, the token-exactness check, and the resume's extra latency.
 *
 *   npx tsx tools/bench/src/reliability.ts [--requests 200] [--concurrency 8] [--stage-timeout 500ms] [--fuzz 5000] [--seed N]
 *     [--topologies vllm-aggregated,vllm-pd,vllm-epd,sglang-aggregated,sglang-pd] (empty: no single-fault matrix)
 *     [--mid-stream-requests 50] (0: no mid-stream deaths)
 *     [--phases incident,stage-down] [--phase-requests 40] (empty: no phases)
 */
import { randomInt } from 'node:crypto';
import {
  Buckets,
  EndpointRecordSchema,
  ModelRouteRecordSchema,
  ModelServerRecordSchema,
  endpointKey,
  objectKey,
  type EndpointRecord,
} from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { resolvePipelineMode, type ModelServerSpec } from '@triad/crd';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { startNatsServer, waitFor, parseToolArgs } from '@triad/testing';
import {
  ANSWER_TOKENS,
  DEATH_POINTS,
  TOPOLOGY_LABELS,
  TOPOLOGY_NAMES,
  counterTotal,
  deployServer,
  deployTopology,
  isMultimodal,
  runFaultScenario,
  runFuzz,
  runMidStreamScenario,
  tokensBeforeDeath,
  scenarioLabel,
  scenariosOf,
  type DeployedTopology,
  type FaultScenario,
  type MatrixStack,
  type MidStreamResult,
  type ScenarioResult,
  type TopologyName,
} from '@triad/testing/reliability';
import { startBenchGateway } from './lib/bench-gateway';
import { markdownTable } from './lib/table';
import { PHASE_COLUMNS, runPhaseSuites } from './reliability-phases';

const { values: args } = parseToolArgs({
  options: {
    requests: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '8' },
    'stage-timeout': { type: 'string', default: '500ms' },
    fuzz: { type: 'string', default: '5000' },
    seed: { type: 'string' },
    topologies: { type: 'string', default: TOPOLOGY_NAMES.join(',') },
    phases: { type: 'string', default: 'incident,stage-down' },
    'phase-requests': { type: 'string', default: '40' },
    'mid-stream-requests': { type: 'string', default: '50' },
  },
});
const NS = 'default';
const REQUESTS = Number(args.requests);
const SEED = args.seed !== undefined ? Number(args.seed) : randomInt(2 ** 31);

const fmt = (n: number) => n.toLocaleString('en-US');

async function main(): Promise<void> {
  const topologies = args.topologies.split(',').filter((t) => t !== '') as TopologyName[];
  const nats = await startNatsServer();
  const bus = await connectBus({ servers: nats.url, name: 'bench-reliability' });
  const sims: SimEngineHandle[] = [];
  const gateway = await startBenchGateway(nats.url, { args: ['--scheduling', 'in-process'] });
  try {
    const [servers, routes, endpoints] = await Promise.all([
      bus.kv(Buckets.modelServers, ModelServerRecordSchema),
      bus.kv(Buckets.modelRoutes, ModelRouteRecordSchema),
      bus.kv(Buckets.endpoints, EndpointRecordSchema),
    ]);
    const gatewayUrl = gateway.url;
    const metricsUrl = `http://127.0.0.1:${gateway.opsPort}/metrics`;
    const stack: MatrixStack = {
      gatewayUrl,
      metricsUrl,
      async startSim(o) {
        const sim = await startSimEngine({ ...o, admin: true, requestLogLimit: 100_000 });
        sims.push(sim);
        return sim;
      },
      async putServer(name, spec) {
        const s = spec as ModelServerSpec;
        await servers.put(objectKey(NS, name), { schemaVersion: 1, namespace: NS, name, mode: resolvePipelineMode(s), spec: s });
      },
      async putRoute(name, spec) {
        await routes.put(objectKey(NS, name), { schemaVersion: 1, namespace: NS, name, spec: spec });
      },
      async putEndpoint(server, pod, role, sim, extra) {
        const s = sim as SimEngineHandle;
        const record: EndpointRecord = {
          schemaVersion: 1,
          namespace: NS,
          modelServer: server,
          pod,
          role,
          ip: s.host,
          port: s.port,
          engine: s.engine === 'vllm' ? 'vLLM' : 'SGLang',
          ready: true,
          models: [s.model],
          updatedAt: Date.now(),
          ...(extra as Partial<EndpointRecord>),
        } as EndpointRecord;
        await endpoints.put(endpointKey(NS, server, pod), record);
      },
      async waitForModel(model) {
        await waitFor(
          async () =>
            ((await (await fetch(`${gatewayUrl}/v1/models`)).json()) as { data: { id: string }[] }).data.some((m) => m.id === model),
          {
            what: `${model} served`,
            timeoutMs: 30_000,
          },
        );
      },
    };
    const options = {
      requests: REQUESTS,
      concurrency: Number(args.concurrency),
      stageTimeout: args['stage-timeout'],
      clientTimeoutMs: 60_000,
      tag: 'bench',
    };
    const rows: string[][] = [];
    const perMode = new Map<
      string,
      { sent: number; failed: number; duplicated: number; retries: number; baselineFailed: number; baselineSent: number }
    >();
    const streamingResets: string[][] = [];
    const midStreamRows: string[][] = [];
    let subnet = 70;
    /** One model per topology with the default traffic policy, for the fuzzed bodies. */
    const fuzzModels: { model: string; multimodal: boolean }[] = [];
    for (const name of topologies) {
      const topo = await deployTopology(stack, name, `127.0.${subnet++}`);
      fuzzModels.push({ model: await deployServer(stack, topo, `fuzz-${name}`), multimodal: isMultimodal(name) });
      for (const scenario of scenariosOf(name, 'resilient')) {
        const r = await runFaultScenario(stack, topo, scenario, options);
        const base = await runFaultScenario(stack, topo, { ...scenario, policy: 'no-retries' }, options);
        rows.push(row(r, base));
        const m = perMode.get(TOPOLOGY_LABELS[name]) ?? {
          sent: 0,
          failed: 0,
          duplicated: 0,
          retries: 0,
          baselineFailed: 0,
          baselineSent: 0,
        };
        m.sent += r.sent;
        m.failed += r.failed;
        m.duplicated += r.duplicated;
        m.retries += r.retries;
        m.baselineFailed += base.failed;
        m.baselineSent += base.sent;
        perMode.set(TOPOLOGY_LABELS[name], m);
        process.stderr.write(`${scenarioLabel(scenario)}: ${r.failed}/${r.sent} failed (baseline ${base.failed})\n`);
      }
      // A streaming answer reset after its first bytes reached the client: nothing can retry it (documented).
      const final = name.endsWith('aggregated') ? 'aggregated' : 'decode';
      const streaming: FaultScenario = { topology: name, stage: final, fault: 'die-mid-stream', policy: 'resilient', streaming: 'all' };
      const s = await runFaultScenario(stack, topo, streaming, options);
      streamingResets.push([
        scenarioLabel(streaming),
        fmt(s.sent),
        fmt(s.failed),
        Object.entries(s.failures)
          .map(([k, v]) => `${k}: ${v}`)
          .join(', ') || '–',
        fmt(s.faultyLegs),
      ]);
      midStreamRows.push(...(await runMidStreamDeaths(stack, topo, Number(args.concurrency))));
    }
    const phaseRows = await runPhaseSuites(
      stack,
      args.phases.split(',').filter((p) => p !== ''),
      () => `127.0.${subnet++}`,
      { requests: Number(args['phase-requests']), concurrency: Number(args.concurrency), stageTimeout: args['stage-timeout'] },
    );
    const fuzzCount = Number(args.fuzz);
    const fuzz = fuzzCount > 0 ? await runFuzzRow(stack, fuzzCount, fuzzModels) : undefined;
    const unexpected = await counterTotal(metricsUrl, 'triad_unexpected_errors_total');

    if (rows.length > 0) {
      process.stdout.write(
        `\n### One of two pods per stage failing (${REQUESTS} requests per scenario, ${args.concurrency} at a time, stage budget ${args['stage-timeout']})\n\n`,
      );
      process.stdout.write(
        `${markdownTable(
          ['mode', 'requests sent', 'failed', 'duplicated', 'retries', 'baseline failed (no retries, no ejection)'],
          [...perMode.entries()].map(([mode, m]) => [
            mode,
            fmt(m.sent),
            fmt(m.failed),
            fmt(m.duplicated),
            fmt(m.retries),
            `${fmt(m.baselineFailed)} of ${fmt(m.baselineSent)}`,
          ]),
        )}\n\n`,
      );
      process.stdout.write(
        `${markdownTable(
          [
            'scenario',
            'requests sent',
            'failed',
            'duplicated',
            're-run legs',
            'KV release legs',
            'retries',
            'legs to the failing pod',
            'baseline failed',
          ],
          rows,
        )}\n\n`,
      );
      process.stdout.write(
        `Streaming answers reset mid-stream by the final stage, without trafficPolicy.streamResume (not retryable once bytes reached the client; resumed in the table after):\n\n`,
      );
      process.stdout.write(
        `${markdownTable(['scenario', 'requests sent', 'failed', 'how', 'legs to the failing pod'], streamingResets)}\n\n`,
      );
    }
    if (phaseRows !== undefined) {
      process.stdout.write(
        `Phases back to back on one gateway (${args['phase-requests']} requests per phase; the incident of issue 32, and each stage down then back):\n\n${markdownTable(PHASE_COLUMNS, phaseRows)}\n\n`,
      );
    }
    printMidStreamDeaths(midStreamRows);
    if (fuzz !== undefined) {
      process.stdout.write(
        `Fuzzed bodies (seed ${SEED}):\n\n${markdownTable(['bodies sent', 'wrong answers (5xx, not OpenAI-shaped, no answer)', 'answers by status'], [fuzz])}\n\n`,
      );
    }
    process.stdout.write(`triad_unexpected_errors_total after the run: ${unexpected}\n`);
  } finally {
    await gateway.child.stop();
    await bus.close();
    await Promise.all(sims.map((s) => s.close()));
    await nats.close();
  }
}

/**
 * Mid-stream deaths of one topology at each point of the stream: with `trafficPolicy.streamResume`, and the same
 * scenario without it (the baseline: every stream fails with an SSE error event).
 */
async function runMidStreamDeaths(stack: MatrixStack, topo: DeployedTopology, concurrency: number): Promise<string[][]> {
  const requests = Number(args['mid-stream-requests']);
  const rows: string[][] = [];
  if (requests <= 0) return rows;
  for (const point of DEATH_POINTS) {
    const options = { requests, concurrency, tag: 'bench', clientTimeoutMs: 60_000 };
    const r = await runMidStreamScenario(stack, topo, { topology: topo.name, point, resume: true }, options);
    const base = await runMidStreamScenario(stack, topo, { topology: topo.name, point, resume: false }, options);
    rows.push(midStreamRow(r, base));
    process.stderr.write(
      `${TOPOLOGY_LABELS[topo.name]}: final pod dies at the ${point}: ${r.failed}/${r.sent} failed, ${r.resumed} resumed\n`,
    );
  }
  return rows;
}

function midStreamRow(r: MidStreamResult, base: MidStreamResult): string[] {
  const extra = [...r.resumeExtraMs].sort((a, b) => a - b);
  const pct = (q: number) => (extra.length === 0 ? '–' : `${extra[Math.min(extra.length - 1, Math.floor(q * extra.length))].toFixed(1)}`);
  const prefills = r.prefillLegsPerRequest;
  const complete = r.sent - r.failed;
  return [
    `${TOPOLOGY_LABELS[r.scenario.topology]}: dies at the ${r.scenario.point}`,
    fmt(r.sent),
    fmt(r.failed),
    fmt(r.metDeath),
    fmt(r.resumed),
    fmt(r.duplicatedText),
    fmt(r.lostText),
    fmt(r.wrongIdOrUsage),
    `${fmt(r.exact)} of ${fmt(complete)}`,
    pct(0.5),
    pct(0.99),
    prefills.length === 0 ? '–' : (prefills.reduce((a, b) => a + b, 0) / prefills.length).toFixed(2),
    `${fmt(base.failed)} of ${fmt(base.sent)}`,
  ];
}

function printMidStreamDeaths(rows: string[][]): void {
  if (rows.length === 0) return;
  process.stdout.write(
    `Streams whose final pod dies mid-answer (${args['mid-stream-requests']} streams per row, ${ANSWER_TOKENS_TEXT}; trafficPolicy.streamResume):\n\n`,
  );
  process.stdout.write(
    `${markdownTable(
      [
        'scenario',
        'streams sent',
        'failed',
        'met the dying pod',
        'resumed',
        'duplicated text',
        'lost text',
        'wrong id or usage',
        'token-exact',
        'resume extra ms p50',
        'p99',
        'prefill legs per stream',
        'baseline failed (no streamResume)',
      ],
      rows,
    )}\n\n`,
  );
}

const ANSWER_TOKENS_TEXT = `${ANSWER_TOKENS}-token answers, the pod dies after token ${DEATH_POINTS.map(tokensBeforeDeath).join(', ')}`;

function row(r: ScenarioResult, base: ScenarioResult): string[] {
  return [
    scenarioLabel(r.scenario),
    fmt(r.sent),
    fmt(r.failed),
    fmt(r.duplicated),
    fmt(r.rerunLegs),
    fmt(r.releaseLegs),
    fmt(r.retries),
    fmt(r.faultyLegs),
    fmt(base.failed),
  ];
}

/** Fuzzed bodies against one model per topology (the default traffic policy), once every fault is cleared. */
async function runFuzzRow(stack: MatrixStack, count: number, models: readonly { model: string; multimodal: boolean }[]): Promise<string[]> {
  const report = await runFuzz(stack.gatewayUrl, SEED, count, {
    models: models.map((m) => m.model),
    multimodalModels: models.filter((m) => m.multimodal).map((m) => m.model),
    concurrency: 4,
  });
  for (const p of report.problems.slice(0, 5))
    process.stderr.write(`fuzz case ${p.index} (seed ${SEED}): ${p.problem} after ${p.mutations.join('; ')} (${p.excerpt})\n`);
  return [
    fmt(report.sent),
    fmt(report.problems.length),
    Object.entries(report.byStatus)
      .map(([k, v]) => `${k}: ${fmt(v)}`)
      .join(', '),
  ];
}

void main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
