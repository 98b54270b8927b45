// The client side the reliability suites share (fault matrix, mid-stream deaths, the benchmark's phases): request
// bodies that make every stage run, one request judged as a client would, a bounded worker pool, and gateway
// counters read from its Prometheus endpoint.

/**
 * A chat request of its own: a long prompt (about 750 tokens by the gateway's estimate) and, for multimodal
 * topologies, two images. Shorter prompts and single images would be prefilled or encoded on the decode pod by the
 * scheduler's per-request disaggregation, and the stage under test never run. `scope` (unique per run, URL-safe) and
 * `i` make the prompt and the image URLs differ from every other request's; `fields` are the request's other fields
 * (`max_tokens`, `stream`, ...).
 */
export function chatBody(model: string, multimodal: boolean, scope: string, i: number, fields: Record<string, unknown>): string {
  const words: string[] = [];
  for (let k = 0; words.length < 500; k++) words.push(`w${i}x${k}`);
  const text = `${scope}, request ${i}: ${words.join(' ')}`;
  const content = multimodal
    ? [
        { type: 'text', text },
        { type: 'image_url', image_url: { url: `https://example.com/${scope}/${i}a.png` } },
        { type: 'image_url', image_url: { url: `https://example.com/${scope}/${i}b.png` } },
      ]
    : text;
  return JSON.stringify({ model, ...fields, messages: [{ role: 'user', content }] });
}

/** What the client saw of one request: why it was not a whole, successful answer (undefined: it was). */
export interface ChatOutcome {
  readonly why?: string;
  /** The gateway served a stage by the engine's shortcut (`x-triad-stage-fallback`). */
  readonly fallback: boolean;
}

/** Sends one chat request and judges the answer: status 200, and a stream ends in `[DONE]` without an error event. */
export async function sendChat(url: string, body: string, id: string, stream: boolean, timeoutMs: number): Promise<ChatOutcome> {
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    const fallback = res.headers.get('x-triad-stage-fallback') !== null;
    if (res.status !== 200) return { why: `status ${res.status}`, fallback };
    if (stream) {
      if (text.includes('data: {"error"')) return { why: 'sse-error', fallback };
      return text.endsWith('data: [DONE]\n\n') ? { fallback } : { why: 'truncated stream', fallback };
    }
    const parsed = JSON.parse(text) as { choices?: unknown[] };
    return Array.isArray(parsed.choices) && parsed.choices.length > 0 ? { fallback } : { why: 'no choices', fallback };
  } catch (err) {
    const name = (err as Error).name;
    return { why: name === 'TimeoutError' ? 'client timeout' : `transport ${name}`, fallback: false };
  }
}

/** Runs `task(i)` for i in [0, count), at most `concurrency` at once. */
export async function forEachConcurrently(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
}

/** Failures counted by reason. */
export class FailureTally {
  failed = 0;
  readonly byReason: Record<string, number> = {};

  add(why: string | undefined): void {
    if (why === undefined) return;
    this.failed++;
    this.byReason[why] = (this.byReason[why] ?? 0) + 1;
  }
}

/** The sum of a metric's series on a Prometheus endpoint; with `label`, only the series whose labels contain it. */
export async function counterTotal(metricsUrl: string, name: string, label?: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const ours = line.startsWith(`${name}{`) || (label === undefined && line.startsWith(`${name} `));
    if (ours && (label === undefined || line.includes(label))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}
