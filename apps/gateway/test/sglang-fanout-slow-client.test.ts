import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SimEngineHandle } from '@triad/engine-sim';
import type { ProxyRequest } from '@triad/request';
import { stalledStream, waitFor } from '@triad/testing';
import { accessLines, sseData, startHarness, type Harness } from './support/harness';

// A slow client of an SGLang PD `n > 1` stream: the gateway fans the request out into n single-sample pairs and
// merges the n decode streams into one. A client that stops reading holds all n decode engines back (as a relayed
// single-sample stream holds its one engine), so the gateway never buffers the answer; once the client reads again
// it gets the whole merged stream, and once it leaves every leg is aborted.

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const N = 3;
/** Output tokens per sample: a chunk of some 250 bytes each, so the merged answer is over 20 MB. */
const TOKENS = 30_000;
/**
 * What the gateway may hold for the client: the response's high-water mark (16 KiB) plus what the n legs deliver
 * before their pause takes (a chunk each), with room to spare, and far below the answer.
 */
const BOUND = 256 * 1024;
const LONG = 'Tell me about the history of the city, its rivers, bridges and markets. '.repeat(8);

function ended(res: IncomingMessage): Promise<void> {
  return new Promise((resolve, reject) => {
    res.once('end', resolve);
    res.once('error', reject);
  });
}

interface Chunk {
  id: string;
  choices: { index: number; delta: { content: string | null }; finish_reason: string | null }[];
  usage?: Record<string, number> | null;
}

describe('gateway, SGLang PD n > 1 streamed to a client that stops reading', () => {
  let h: Harness;
  let p: SimEngineHandle;
  let d: SimEngineHandle;
  /** The gateway's responses to fanned-out requests, newest last (a lifecycle hook hands them over). */
  const responses: ServerResponse[] = [];
  const seeResponse = {
    onFirstToken(ctx: ProxyRequest): void {
      // The client side of a request is node's ServerResponse (`ClientSink` is a structural subset of it).
      if (ctx.body['n'] === N) responses.push(ctx.sink as unknown as ServerResponse);
    },
  };
  /** Bytes the gateway holds for the client: its response's buffer, the socket's included. */
  const buffered = () => (responses.at(-1) as ServerResponse).writableLength;
  const allStalled = () => d.stalledStreams().streams === N;

  beforeAll(async () => {
    h = await startHarness({ config: { scheduling: 'in-process' }, hooks: [seeResponse] });
    p = await h.startSim({ engine: 'sglang', role: 'prefill', host: '127.0.14.1', model: MODEL, bootstrapPort: 0 });
    d = await h.startSim({ engine: 'sglang', role: 'decode', host: '127.0.14.2', model: MODEL });
    await h.putServer('pd', {
      model: MODEL,
      inferenceEngine: 'SGLang',
      workloadPort: { port: 30000, protocol: 'http' },
      workloadSelector: { matchLabels: { app: 'pd' }, pdGroup: { groupKey: 'g', prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } } },
    });
    await h.putRoute('llama-pd', { modelName: 'llama-pd', rules: [{ targetModels: [{ modelServerName: 'pd', weight: 100 }] }] });
    await h.putEndpoint('pd', 'p', 'prefill', p, { group: 'g1' });
    await h.putEndpoint('pd', 'd', 'decode', d, { group: 'g1' });
    await h.waitForModel('llama-pd');
  });
  afterAll(async () => {
    await h?.close();
  });

  const longAnswer = {
    model: 'llama-pd',
    n: N,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: TOKENS,
    ignore_eos: true,
    messages: [{ role: 'user', content: LONG }],
  };

  /** Waits until every decode stream waits for the gateway to read, or the gateway buffers past the bound. */
  const held = async (what: string) => {
    await waitFor(() => allStalled() || buffered() > BOUND, { what, timeoutMs: 20_000 });
    expect(buffered()).toBeLessThan(BOUND);
    expect(d.stalledStreams().streams).toBe(N);
  };

  it('holds every decode engine back while the client does not read, then delivers the whole merged stream', async () => {
    const { res, chunks } = await stalledStream(new URL('/v1/chat/completions', h.gateway.url), longAnswer);
    expect(res.statusCode).toBe(200);
    await held(`all ${N} decode streams waiting for the gateway to read`);
    // Another request through the same gateway and engines is served meanwhile, and the stalled streams stay held.
    const other = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'llama-pd', max_tokens: 4, messages: [{ role: 'user', content: LONG }] }),
    });
    expect(other.status).toBe(200);
    await other.arrayBuffer();
    await held(`all ${N} decode streams still waiting`);
    // Every sample is held part-way: what its engine wrote sits in socket buffers, not in the gateway.
    expect(d.stalledStreams().tokensWritten).toBeLessThan(N * TOKENS);

    res.resume();
    await ended(res);
    const events = sseData(Buffer.concat(chunks).toString('utf8'));
    expect(events.filter((e) => e === '[DONE]')).toHaveLength(1);
    expect(events.at(-1)).toBe('[DONE]');
    const merged = events.slice(0, -1).map((e) => JSON.parse(e) as Chunk);
    expect(new Set(merged.map((c) => c.id)).size).toBe(1);
    const contentTokens = new Array<number>(N).fill(0);
    const finishes = new Array<number>(N).fill(0);
    for (const c of merged) {
      for (const choice of c.choices) {
        if (choice.delta.content) contentTokens[choice.index] += 1;
        if (choice.finish_reason !== null) finishes[choice.index] += 1;
      }
    }
    expect(contentTokens).toEqual(new Array<number>(N).fill(TOKENS));
    expect(finishes).toEqual(new Array<number>(N).fill(1));
    const usage = merged.filter((c) => c.usage != null);
    expect(usage).toHaveLength(1);
    expect(usage[0]).toBe(merged.at(-1));
    expect(usage[0].usage).toMatchObject({ completion_tokens: N * TOKENS });
    await waitFor(() => d.stalledStreams().streams === 0 && d.kvHeld().requests === 0, { what: 'the decode to hold nothing' });
  });

  it('aborts every held leg when the client leaves while held, and the engines let go', async () => {
    const abortedBefore = d.counters()['aborted'] ?? 0;
    const left = accessLines(h).filter((l) => l['status_code'] === 499).length;
    const { res } = await stalledStream(new URL('/v1/chat/completions', h.gateway.url), longAnswer);
    await held(`all ${N} decode streams waiting for the gateway to read`);
    res.destroy();
    await waitFor(() => (d.counters()['aborted'] ?? 0) === abortedBefore + N, { what: `the ${N} decode legs aborted` });
    await waitFor(() => d.stalledStreams().streams === 0, { what: 'no decode stream left waiting' });
    await waitFor(() => d.kvHeld().requests === 0 && p.kvHeld().requests === 0, { what: 'the engines to hold no KV' });
    await waitFor(() => accessLines(h).filter((l) => l['status_code'] === 499).length === left + 1, { what: 'a 499 access line' });
  });
});
