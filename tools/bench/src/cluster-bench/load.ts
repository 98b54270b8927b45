import { Agent } from 'undici';
import { Rng } from '../cluster-sim/rng';
import { WorkloadGenerator, type SimRequest, type WorkloadSpec } from '../cluster-sim/workload';
import { chatBody } from './requests';

/** One request as the client saw it; times in real ms from the start of the run. */
export interface ClientResult {
  readonly request: SimRequest;
  /** When it was sent (real ms since the run started). */
  readonly sentAt: number;
  readonly ok: boolean;
  readonly status: number;
  /** Time to the first content token (real ms), Infinity when none came. */
  readonly ttftMs: number;
  readonly e2eMs: number;
  /** Whether it belongs to the measured window (after the warm-up). */
  readonly measured: boolean;
}

/**
 * The requests of one run, the same as the discrete-event simulator generates for this workload and seed
 * (`runSimulation`: same generator, same arrival stream), with arrivals in GPU-time ms at `ratePerS`.
 */
export function workloadRequests(workload: WorkloadSpec, seed: number, ratePerS: number, count: number): SimRequest[] {
  const gen = new WorkloadGenerator(workload, seed);
  const gapRng = new Rng(seed ^ 0x9e3779b9);
  const out: SimRequest[] = [];
  let t = 0;
  for (let i = 0; i < count; i++) {
    t += gapRng.exp(1000 / ratePerS);
    out.push(gen.next(t));
  }
  return out;
}

/**
 * The encoder-cache hit ratio no router can beat in this run: the share of the measured window's image items that
 * repeat an image sent earlier in the run (warm-up included). A first send is encoded wherever it goes; a repeat
 * can hit only where an engine still holds it, so the figure assumes unbounded caches. NaN without images.
 */
export function repeatCeiling(requests: readonly SimRequest[], warmup: number): number {
  const firstMeasured = Math.floor(requests.length * warmup);
  const sent = new Set<number>();
  let items = 0;
  let repeats = 0;
  requests.forEach((r, i) => {
    for (const image of r.images) {
      if (i >= firstMeasured) {
        items++;
        if (sent.has(image)) repeats++;
      }
      sent.add(image);
    }
  });
  return items === 0 ? NaN : repeats / items;
}

const FIRST_CONTENT = /"content":"[^"]/;

/** Sends one streamed request and times its first content token. */
async function send(url: string, model: string, r: SimRequest, dispatcher: Agent, t0: number, measured: boolean): Promise<ClientResult> {
  const sentAt = performance.now() - t0;
  let ttft = Infinity;
  let status = 0;
  let ok: boolean;
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chatBody(model, r)),
      // @ts-expect-error undici's fetch takes a dispatcher
      dispatcher,
    });
    status = res.status;
    let tail = '';
    let errored = false;
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      const text = decoder.decode(chunk, { stream: true });
      if (ttft === Infinity && FIRST_CONTENT.test(text)) ttft = performance.now() - t0 - sentAt;
      if (text.includes('"error"')) errored = true;
      tail = (tail + text).slice(-64);
    }
    ok = res.ok && !errored && tail.includes('[DONE]') && ttft !== Infinity;
  } catch {
    ok = false;
  }
  return { request: r, sentAt, ok, status, ttftMs: ok ? ttft : Infinity, e2eMs: performance.now() - t0 - sentAt, measured };
}

/**
 * Open-loop load: each request is sent at its arrival time × `timeScale` whatever the answers do (a slow router
 * does not slow the offered load down). The first `warmup` share is sent but not measured.
 */
export async function runOpenLoop(
  url: string,
  model: string,
  requests: readonly SimRequest[],
  timeScale: number,
  warmup: number,
  onMeasureStart?: () => void,
): Promise<ClientResult[]> {
  const dispatcher = new Agent({ connections: 512, keepAliveTimeout: 10_000 });
  const t0 = performance.now();
  const firstMeasured = Math.floor(requests.length * warmup);
  const pending: Promise<ClientResult>[] = [];
  try {
    for (const [i, r] of requests.entries()) {
      const due = r.arrival * timeScale - (performance.now() - t0);
      if (due > 1) await new Promise((resolve) => setTimeout(resolve, due));
      if (i === firstMeasured) onMeasureStart?.();
      pending.push(send(url, model, r, dispatcher, t0, i >= firstMeasured));
    }
    return await Promise.all(pending);
  } finally {
    await dispatcher.close();
  }
}

/**
 * Closed-loop saturation: `concurrency` requests always in flight for `durationMs` (real time); the completion rate
 * of the middle half (real requests/s) is the pool's capacity for this workload.
 */
export async function measureSaturation(
  url: string,
  model: string,
  requests: readonly SimRequest[],
  concurrency: number,
  durationMs: number,
): Promise<number> {
  const dispatcher = new Agent({ connections: 512, keepAliveTimeout: 10_000 });
  const t0 = performance.now();
  const done: number[] = [];
  let next = 0;
  const worker = async () => {
    while (performance.now() - t0 < durationMs && next < requests.length) {
      const r = requests[next++];
      const res = await send(url, model, r, dispatcher, t0, true);
      if (res.ok) done.push(performance.now() - t0);
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    await dispatcher.close();
  }
  done.sort((a, b) => a - b);
  const lo = Math.floor(done.length / 4);
  const hi = Math.floor((3 * done.length) / 4);
  if (hi <= lo) return NaN;
  return (hi - lo) / ((done[hi] - done[lo]) / 1000);
}
