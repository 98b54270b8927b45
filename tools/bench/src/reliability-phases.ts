/**
 * Phases of the reliability suite that run back to back against one gateway, as incidents happen (issue 32): the
 * incident pattern (a pod hangs, the other resets, the faults clear, then one answers 500 to streams) and a whole
 * stage down per stage and connector, then back. Kept apart from reliability.ts's single-fault matrix.
 */
import {
  chatBody,
  deployServer,
  deployTopology,
  FailureTally,
  forEachConcurrently,
  sendChat,
  isMultimodal,
  type DeployedTopology,
  type FaultableSim,
  type MatrixStack,
  type StageName,
  type TopologyName,
} from '@triad/testing/reliability';

export interface PhaseOptions {
  readonly requests: number;
  readonly concurrency: number;
  readonly stageTimeout: string;
}

/** What one phase did: requests sent, failed (and how), and how many were served by a stage fallback. */
export interface PhaseResult {
  readonly sent: number;
  readonly failed: number;
  readonly failures: Record<string, number>;
  readonly fallbacks: number;
}

type Fault = 'ok' | 'error500' | 'refuse' | 'hang' | 'die-mid-stream';

const fmt = (n: number) => n.toLocaleString('en-US');

/** A long prompt of its own per request (so per-request disaggregation keeps every stage), two images for EPD. */
function body(model: string, multimodal: boolean, tag: string, i: number, stream: boolean): string {
  return chatBody(model, multimodal, tag, i, { max_tokens: 4, stream });
}

const sendOne = (url: string, payload: string, id: string, stream: boolean) => sendChat(url, payload, id, stream, 60_000);

/**
 * After a stage's pods answer again: one request at a time until one is served on the normal path (200, no
 * stage fallback), i.e. until an active probe or the end of the ejection let the scheduler pick the stage again.
 * Returns the time that took, or undefined after 15 s.
 */
async function untilNormalPath(url: string, model: string, multimodal: boolean, tag: string): Promise<number | undefined> {
  const start = performance.now();
  for (let i = 0; performance.now() - start < 15_000; i++) {
    const r = await sendOne(url, body(model, multimodal, tag, i, false), `${tag}-r${i}`, false);
    if (r.why === undefined && !r.fallback) return performance.now() - start;
  }
  return undefined;
}

/** Sends one phase's requests (`streaming`: all, or every other one) and counts the outcomes. */
async function runPhase(
  stack: MatrixStack,
  model: string,
  multimodal: boolean,
  tag: string,
  streaming: 'all' | 'mixed',
  options: PhaseOptions,
): Promise<PhaseResult> {
  const tally = new FailureTally();
  let fallbacks = 0;
  await forEachConcurrently(options.requests, options.concurrency, async (i) => {
    const stream = streaming === 'all' || i % 2 === 1;
    const r = await sendOne(stack.gatewayUrl, body(model, multimodal, tag, i, stream), `${tag}-r${i}`, stream);
    if (r.fallback) fallbacks++;
    tally.add(r.why);
  });
  return { sent: options.requests, failed: tally.failed, failures: tally.byReason, fallbacks };
}

function phaseRow(scenario: string, phase: string, r: PhaseResult): string[] {
  const how = Object.entries(r.failures)
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ');
  return [scenario, phase, fmt(r.sent), fmt(r.failed), how || '–', fmt(r.fallbacks)];
}

export const PHASE_COLUMNS = ['scenario', 'phase', 'requests sent', 'failed', 'how', 'stage fallbacks'];

const pods = (topo: DeployedTopology, stage: StageName) => topo.sims[stage] as readonly [FaultableSim, FaultableSim];

/**
 * The incident of issue 32 on the final stage of `topology` (aggregated, or decode), phases back to back with one
 * ModelServer and no reset in between: pod 1 hangs past the stage budget; pod 0 resets connections; the faults
 * clear; pod 0 answers 500 and every request streams. Goal: 0 failed in every phase (one pod is always healthy).
 */
export async function runIncidentPhases(
  stack: MatrixStack,
  topology: TopologyName,
  hostPrefix: string,
  options: PhaseOptions,
): Promise<string[][]> {
  const topo = await deployTopology(stack, topology, hostPrefix);
  const model = await deployServer(stack, topo, `incident-${topology}`, { timeout: options.stageTimeout });
  const final: StageName = topology.endsWith('aggregated') ? 'aggregated' : 'decode';
  const [pod0, pod1] = pods(topo, final);
  const multimodal = isMultimodal(topology);
  const phases: { label: string; faults: [Fault, Fault]; streaming: 'all' | 'mixed' }[] = [
    { label: `${final}-1 hangs`, faults: ['ok', 'hang'], streaming: 'mixed' },
    { label: `${final}-0 resets connections`, faults: ['refuse', 'ok'], streaming: 'mixed' },
    { label: 'faults cleared', faults: ['ok', 'ok'], streaming: 'mixed' },
    { label: `${final}-0 answers 500, all streamed`, faults: ['error500', 'ok'], streaming: 'all' },
  ];
  const rows: string[][] = [];
  try {
    for (const [n, phase] of phases.entries()) {
      pod0.setFault({ mode: phase.faults[0] });
      pod1.setFault({ mode: phase.faults[1] });
      const r = await runPhase(stack, model, multimodal, `inc-${topology}-${n}`, phase.streaming, options);
      rows.push(phaseRow(`incident, ${topology}`, phase.label, r));
      process.stderr.write(`incident ${topology} / ${phase.label}: ${r.failed}/${r.sent} failed\n`);
    }
  } finally {
    pod0.setFault({ mode: 'ok' });
    pod1.setFault({ mode: 'ok' });
  }
  return rows;
}

/** One stage-down case: a topology, the ModelServer's spec changes (connector), the stage taken down. */
interface StageDownCase {
  readonly label: string;
  readonly topology: TopologyName;
  readonly stage: StageName;
  /** Spec fields over the topology's (e.g. another KV connector). */
  readonly spec?: Record<string, unknown>;
  /** Whether the engines have a shortcut for the stage (else its requests are expected to fail). */
  readonly shortcut: boolean;
}

const STAGE_DOWN_CASES: readonly StageDownCase[] = [
  { label: 'vLLM PD (NIXL), every prefill down', topology: 'vllm-pd', stage: 'prefill', shortcut: true },
  {
    label: 'vLLM PD (plain http KV), every prefill down',
    topology: 'vllm-pd',
    stage: 'prefill',
    spec: { kvConnector: { type: 'http' } },
    shortcut: false,
  },
  { label: 'vLLM EPD (NIXL EC), every encoder down', topology: 'vllm-epd', stage: 'encode', shortcut: true },
  { label: 'vLLM EPD (NIXL EC), every prefill down', topology: 'vllm-epd', stage: 'prefill', shortcut: true },
  { label: 'SGLang PD, every prefill down', topology: 'sglang-pd', stage: 'prefill', shortcut: false },
];

/**
 * A whole stage down, then back, per stage and connector (issue 32, item 2), on a fresh ModelServer each (no
 * ejections carried over) with active probes every 500 ms: "down" sends requests while both pods of the stage answer
 * 500; once they answer again, single requests measure how long until one takes the normal path (an active probe
 * ends the ejection), then "back" sends the same number as "down". Requests served by the engine's shortcut carry
 * `x-triad-stage-fallback` and are counted. Goal: 0 failed where the engines have a shortcut; where they have none,
 * the failures are the expected 5xx naming the stage.
 */
export async function runStageDownPhases(stack: MatrixStack, hostPrefixes: () => string, options: PhaseOptions): Promise<string[][]> {
  const rows: string[][] = [];
  const deployed = new Map<TopologyName, DeployedTopology>();
  for (const [n, c] of STAGE_DOWN_CASES.entries()) {
    let topo = deployed.get(c.topology);
    if (topo === undefined) {
      topo = await deployTopology(stack, c.topology, hostPrefixes());
      deployed.set(c.topology, topo);
    }
    const name = `down-${n}-${c.topology}`;
    const trafficPolicy = { timeout: options.stageTimeout, outlierDetection: { probe: { path: '/health', interval: '500ms' } } };
    await deployServer(stack, topo, name, trafficPolicy, c.spec);
    const [a, b] = pods(topo, c.stage);
    const multimodal = isMultimodal(c.topology);
    const scenario = `${c.label}${c.shortcut ? '' : ' (no shortcut)'}`;
    try {
      a.setFault({ mode: 'error500' });
      b.setFault({ mode: 'error500' });
      const down = await runPhase(stack, name, multimodal, `${name}-down`, 'mixed', options);
      rows.push(phaseRow(scenario, `${c.stage} down`, down));
      a.setFault({ mode: 'ok' });
      b.setFault({ mode: 'ok' });
      const recoveredMs = await untilNormalPath(stack.gatewayUrl, name, multimodal, `${name}-recover`);
      const back = await runPhase(stack, name, multimodal, `${name}-back`, 'mixed', options);
      const after = recoveredMs === undefined ? 'not back within 15 s' : `normal path after ${Math.round(recoveredMs)} ms`;
      rows.push(phaseRow(scenario, `${c.stage} back (${after})`, back));
      process.stderr.write(
        `${scenario}: down ${down.failed}/${down.sent} failed, ${down.fallbacks} fallbacks; ${after}; back ${back.fallbacks} fallbacks\n`,
      );
    } finally {
      a.setFault({ mode: 'ok' });
      b.setFault({ mode: 'ok' });
    }
  }
  return rows;
}

/**
 * Runs the selected phase suites (`incident`, `stage-down`) and returns their table, or undefined when none is
 * selected. The incident runs on vLLM aggregated, vLLM PD and SGLang aggregated.
 */
export async function runPhaseSuites(
  stack: MatrixStack,
  suites: readonly string[],
  nextHostPrefix: () => string,
  options: PhaseOptions,
): Promise<string[][] | undefined> {
  if (suites.length === 0) return undefined;
  const rows: string[][] = [];
  if (suites.includes('incident')) {
    for (const topology of ['vllm-aggregated', 'vllm-pd', 'sglang-aggregated'] as const)
      rows.push(...(await runIncidentPhases(stack, topology, nextHostPrefix(), options)));
  }
  if (suites.includes('stage-down')) rows.push(...(await runStageDownPhases(stack, nextHostPrefix, options)));
  return rows;
}
