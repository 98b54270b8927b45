import { createHash } from 'node:crypto';
import type { Case } from './cases';
import type { Bench } from './bench';
import type { RequestResult } from './diff';
import { protocolExchanges } from './exchange';
import { normalise, type Trace } from './normalise';
import type { RunningRouter } from './router';

const REQUEST_TIMEOUT_MS = 60_000;
const SETTLE_MS = 15_000;

/** One router's run over the request set. */
export interface RouterRun {
  readonly router: string;
  /** What the router did before the first request (a Mooncake proxy's `/query`, probes excluded). */
  readonly setup: Trace;
  readonly results: readonly RequestResult[];
  /** Cases whose prefill leg had to run and did not (a PD comparison without a prefill proves nothing). */
  readonly prefillMissing: readonly string[];
}

async function send(url: string, c: Case): Promise<RequestResult['client']> {
  try {
    const res = await fetch(`${url}${c.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(c.body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    const stream = c.body['stream'] === true;
    const complete = res.ok && (stream ? text.trimEnd().endsWith('data: [DONE]') && !text.includes('"error"') : text.includes('"choices"'));
    return { status: res.status, complete };
  } catch {
    return { status: 0, complete: false };
  }
}

const MEDIA_PART = new Set(['image_url', 'audio_url', 'video_url']);

/**
 * Names for what the client sent, so both routers' legs use the same ones whatever order they make: each media
 * URL (`<media#1>.url`) and the uuid an EPD router derives from it (SHA-256 of the URL, vLLM's `content_uuid`:
 * `<media#1>`), and the prompt's texts (`<prompt#1>`).
 */
export function clientSeeds(body: Record<string, unknown>): Map<string, string> {
  const seeds = new Map<string, string>();
  let media = 0;
  let prompts = 0;
  const text = (t: unknown) => {
    if (typeof t === 'string' && !seeds.has(t)) seeds.set(t, `<prompt#${++prompts}>`);
  };
  text(body['prompt']);
  for (const m of Array.isArray(body['messages']) ? (body['messages'] as Record<string, unknown>[]) : []) {
    const content = m['content'];
    if (!Array.isArray(content)) text(content);
    for (const part of Array.isArray(content) ? (content as Record<string, unknown>[]) : []) {
      const type = String(part['type']);
      if (type === 'text') text(part['text']);
      if (!MEDIA_PART.has(type)) continue;
      const url = (part[type] as { url?: unknown } | undefined)?.url;
      if (typeof url !== 'string') continue;
      media += 1;
      seeds.set(url, `<media#${media}>.url`);
      seeds.set(createHash('sha256').update(url).digest('hex'), `<media#${media}>`);
    }
  }
  return seeds;
}

/** Sends every case through `router`, one at a time, and normalises what the taps saw for each. */
export async function runCases(
  router: RunningRouter,
  bench: Bench,
  cases: readonly Case[],
  prefillStage: string | undefined,
): Promise<RouterRun> {
  const book = bench.addressBook();
  const setup = normalise(protocolExchanges(bench.take()), book);
  const results: RequestResult[] = [];
  const prefillMissing: string[] = [];
  for (const c of cases) {
    for (const stage of c.fault?.stages ?? []) bench.stage(stage).sim.setFault({ mode: c.fault!.mode, count: 1 });
    bench.begin();
    const client = await send(router.url, c);
    await bench.settle(SETTLE_MS);
    for (const stage of c.fault?.stages ?? []) bench.stage(stage).sim.setFault({ mode: 'ok' });
    const exchanges = protocolExchanges(bench.take());
    const trace = normalise(exchanges, book, clientSeeds(c.body));
    // A request the router refused itself (4xx, no leg) has no prefill to miss.
    const served = client.status >= 200 && client.status < 300;
    if (served && c.needsPrefill && prefillStage && !exchanges.some((x) => x.stage === prefillStage && x.port === 'api'))
      prefillMissing.push(c.name);
    results.push({ case: c.name, client, trace, outcome: bench.outcome() });
  }
  return { router: router.name, setup, results, prefillMissing };
}
