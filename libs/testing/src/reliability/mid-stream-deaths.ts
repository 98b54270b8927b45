// Mid-stream deaths: the final pod (aggregated or decode) of a topology drops every stream after its K-th token,
// and the gateway, with `trafficPolicy.streamResume`, continues each stream on the other pod. Each request is sent
// twice: first with no fault (its reference answer: what the engines produce uninterrupted), then with the fault.
// The client's text must equal the reference, token for token: nothing repeated, nothing lost. The gateway test
// (apps/gateway/test/reliability/stream-resume.test.ts) and the benchmark (tools/bench/src/reliability.ts) share it.

import { chatBody, counterTotal, FailureTally, forEachConcurrently } from './client';
import {
  deployServer,
  isMultimodal,
  stagesOf,
  type DeployedTopology,
  type FaultableSim,
  type MatrixStack,
  type TopologyName,
} from './fault-matrix';

/** Where the stream dies: after its first token, half-way, or before its last token. */
export const DEATH_POINTS = ['first token', 'middle', 'last token'] as const;
export type DeathPoint = (typeof DEATH_POINTS)[number];

/** Tokens every answer has (`max_tokens`; the simulator's answers are longer, so each stops at `length`). */
export const ANSWER_TOKENS = 24;

/** Tokens the dying pod writes before the connection drops. */
export function tokensBeforeDeath(point: DeathPoint): number {
  return point === 'first token' ? 1 : point === 'middle' ? ANSWER_TOKENS / 2 : ANSWER_TOKENS - 1;
}

export interface MidStreamScenario {
  readonly topology: TopologyName;
  readonly point: DeathPoint;
  /** With `trafficPolicy.streamResume` (else the baseline: the stream fails with an SSE error event). */
  readonly resume: boolean;
}

export interface MidStreamOptions {
  readonly requests: number;
  readonly concurrency?: number;
  /** Unique per run: model server names and request ids. */
  readonly tag: string;
  readonly clientTimeoutMs?: number;
}

export interface MidStreamResult {
  readonly scenario: MidStreamScenario;
  readonly sent: number;
  /** Anything but a complete 200 stream ending in `[DONE]` without an error event. */
  readonly failed: number;
  readonly failures: Readonly<Record<string, number>>;
  /** Streams the gateway resumed (`triad_gateway_stream_resumes_total{outcome="resumed"}`). */
  readonly resumed: number;
  /**
   * Streams whose first final leg went to the dying pod (the rest were served by the healthy one from the start: the
   * scheduler prefers pod 0 by load, but in EPD the choice also follows the encoders and prefill).
   */
  readonly metDeath: number;
  /** Complete streams whose text equals the reference answer and whose usage counts the reference's tokens. */
  readonly exact: number;
  /** Complete streams with more text than the reference (something repeated) or other text. */
  readonly duplicatedText: number;
  /** Complete streams with less text than the reference (something lost). */
  readonly lostText: number;
  /** Complete streams whose chunks carried more than one `id`, or whose usage differs from the reference's. */
  readonly wrongIdOrUsage: number;
  /** Per resumed stream: the gap at the resume minus the stream's median gap between tokens, ms. */
  readonly resumeExtraMs: readonly number[];
  /** Prefill legs per stream that met the dying pod (PD, EPD): 2 when the continuation was prefilled again. */
  readonly prefillLegsPerRequest: readonly number[];
}

interface StreamRead {
  readonly status: number;
  readonly text: string;
  readonly ids: ReadonlySet<string>;
  readonly usage: { prompt_tokens: number; completion_tokens: number } | undefined;
  /** Arrival times (performance.now()) of the chunks with text, in order. */
  readonly tokenAt: readonly number[];
  readonly done: boolean;
  readonly errorEvent: boolean;
  readonly error?: string;
}

let counter = 0;

/** Streams one request and records what the client saw, chunk by chunk. */
async function readStream(url: string, payload: string, id: string, timeoutMs: number): Promise<StreamRead> {
  const ids = new Set<string>();
  const tokenAt: number[] = [];
  let text = '';
  let usage: StreamRead['usage'];
  let done = false;
  let errorEvent = false;
  let status = 0;
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body: payload,
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = res.status;
    if (res.body === null) return { status, text, ids, usage, tokenAt, done, errorEvent };
    const decoder = new TextDecoder();
    let pending = '';
    for await (const part of res.body) {
      const now = performance.now();
      pending += decoder.decode(part as Uint8Array, { stream: true });
      let cut = pending.indexOf('\n\n');
      while (cut >= 0) {
        const event = pending.slice(0, cut).trim();
        pending = pending.slice(cut + 2);
        cut = pending.indexOf('\n\n');
        if (!event.startsWith('data:')) continue;
        const data = event.slice(5).trim();
        if (data === '[DONE]') {
          done = true;
          continue;
        }
        const chunk = JSON.parse(data) as {
          id?: string;
          error?: unknown;
          choices?: { delta?: { content?: string | null } }[];
          usage?: { prompt_tokens: number; completion_tokens: number } | null;
        };
        if (chunk.error !== undefined) {
          errorEvent = true;
          continue;
        }
        if (typeof chunk.id === 'string') ids.add(chunk.id);
        const content = chunk.choices?.[0]?.delta?.content;
        if (typeof content === 'string' && content.length > 0) {
          text += content;
          tokenAt.push(now);
        }
        if (chunk.usage) usage = chunk.usage;
      }
    }
    return { status, text, ids, usage, tokenAt, done, errorEvent };
  } catch (err) {
    return { status, text, ids, usage, tokenAt, done, errorEvent, error: (err as Error).name };
  }
}

const RESUMED = ['triad_gateway_stream_resumes_total', 'outcome="resumed"'] as const;

/**
 * Resumes counted since `before`, once the count reaches `expected`: a request's metrics are recorded when its stage
 * loop ends, a moment after the client read `[DONE]` (vLLM EPD's loop may still wait for its prefill's answer). Gives
 * up after 10 s and returns what was counted.
 */
async function settledResumes(metricsUrl: string, before: number, expected: number): Promise<number> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const now = (await counterTotal(metricsUrl, ...RESUMED)) - before;
    if (now >= expected || performance.now() > deadline) return now;
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.floor(sorted.length / 2)];
}

/** The final stage's pods of a topology (pod 0 dies). */
function finalPods(topo: DeployedTopology): readonly [FaultableSim, FaultableSim] {
  const stages = stagesOf(topo.name);
  return topo.sims[stages[stages.length - 1] as 'aggregated' | 'decode'] as readonly [FaultableSim, FaultableSim];
}

/** Runs one mid-stream-death scenario over a deployed topology. */
export async function runMidStreamScenario(
  stack: MatrixStack,
  topo: DeployedTopology,
  scenario: MidStreamScenario,
  options: MidStreamOptions,
): Promise<MidStreamResult> {
  const name = `ms-${options.tag}-${++counter}`;
  // Ejection off: every request meets the dying pod first, so every one exercises the resume.
  const trafficPolicy: Record<string, unknown> = {
    timeout: '5s',
    outlierDetection: { consecutiveErrors: 0 },
    ...(scenario.resume ? { streamResume: { maxTokens: 4096 } } : {}),
  };
  const model = await deployServer(stack, topo, name, trafficPolicy);
  const sims = Object.values(topo.sims).flatMap((pair) => [...(pair ?? [])]);
  for (const sim of sims) {
    sim.setFault({ mode: 'ok' });
    sim.clearRequests();
  }
  const timeoutMs = options.clientTimeoutMs ?? 30_000;
  const multimodal = isMultimodal(scenario.topology);
  const runAll = async (phase: string): Promise<StreamRead[]> => {
    const out: StreamRead[] = new Array<StreamRead>(options.requests);
    await forEachConcurrently(options.requests, options.concurrency ?? 1, async (i) => {
      // The same body in both phases: the reference is what the engines answer to exactly this request.
      const fields = { max_tokens: ANSWER_TOKENS, seed: 1000 + i, stream: true, stream_options: { include_usage: true } };
      const body = chatBody(model, multimodal, model, i, fields);
      out[i] = await readStream(stack.gatewayUrl, body, `${model}-${phase}${i}`, timeoutMs);
    });
    return out;
  };
  const [dying] = finalPods(topo);
  const resumedBefore = await counterTotal(stack.metricsUrl, ...RESUMED);
  const k = tokensBeforeDeath(scenario.point);
  dying.setFault({ mode: 'die-mid-stream', afterTokens: k });
  let faulted: StreamRead[];
  try {
    // The faulted requests go first, on cold caches: a reference sent before would leave the prompt cached on a
    // decode pod, and the scheduler would skip the prefill the continuation is checked for.
    faulted = await runAll('f');
  } finally {
    dying.setFault({ mode: 'ok' });
  }
  const fId = (i: number) => `${model}-f${i}`;
  const died = new Set<string>();
  for (const r of dying.requests()) {
    const id = r.headers['x-request-id'];
    if (r.method === 'POST' && r.path.startsWith('/v1/') && typeof id === 'string' && id.startsWith(`${model}-f`)) died.add(id);
  }
  const resumed = await settledResumes(stack.metricsUrl, resumedBefore, scenario.resume ? died.size : 0);
  const reference = await runAll('ref');
  const tally = new FailureTally();
  let exact = 0;
  let duplicatedText = 0;
  let lostText = 0;
  let wrongIdOrUsage = 0;
  const resumeExtraMs: number[] = [];
  for (const [i, got] of faulted.entries()) {
    const ref = reference[i];
    const why =
      got.status !== 200
        ? `status ${got.status}`
        : got.error !== undefined
          ? `transport ${got.error}`
          : got.errorEvent
            ? 'sse-error'
            : !got.done
              ? 'truncated stream'
              : undefined;
    tally.add(why);
    if (why !== undefined) continue;
    if (got.text === ref.text) exact++;
    else if (got.text.length < ref.text.length && ref.text.startsWith(got.text)) lostText++;
    else duplicatedText++;
    const usageOk =
      got.usage !== undefined &&
      ref.usage !== undefined &&
      got.usage.prompt_tokens === ref.usage.prompt_tokens &&
      got.usage.completion_tokens === ref.usage.completion_tokens;
    if (got.ids.size !== 1 || !usageOk) wrongIdOrUsage++;
    // The gap at the resume: between token k and token k+1 (the continuation's first).
    if (got.tokenAt.length > k && k > 0) {
      const gaps: number[] = [];
      for (let t = 1; t < got.tokenAt.length; t++) if (t !== k) gaps.push(got.tokenAt[t] - got.tokenAt[t - 1]);
      resumeExtraMs.push(got.tokenAt[k] - got.tokenAt[k - 1] - median(gaps));
    }
  }
  const prefillLegsPerRequest: number[] = [];
  const prefills = topo.sims.prefill;
  if (prefills !== undefined) {
    for (let i = 0; i < options.requests; i++) {
      const id = fId(i);
      if (!died.has(id)) continue;
      let n = 0;
      for (const sim of prefills)
        for (const r of sim.requests()) if (r.method === 'POST' && r.headers['x-request-id'] === id && r.path.startsWith('/v1/')) n++;
      prefillLegsPerRequest.push(n);
    }
  }
  return {
    scenario,
    sent: options.requests,
    failed: tally.failed,
    failures: tally.byReason,
    resumed,
    metDeath: died.size,
    exact,
    duplicatedText,
    lostText,
    wrongIdOrUsage,
    resumeExtraMs,
    prefillLegsPerRequest,
  };
}
