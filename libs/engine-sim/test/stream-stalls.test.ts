import type { SimEngineHandle } from '@triad/engine-sim';
import { stalledStream, waitFor } from '@triad/testing';
import { CHAT, SimFleet, sseEvents } from './helpers';

/** Output tokens of the answer: some 250 bytes of SSE each, far more than the sockets' buffers take. */
const TOKENS = 30_000;

describe('simulator: a streamed answer whose reader stops reading', () => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;

  beforeAll(async () => {
    sim = await fleet.start({ engine: 'sglang', role: 'both', host: '127.0.0.28' });
  });
  afterAll(() => fleet.closeAll());

  it('stops producing and reports the stream stalled, then finishes it once the reader drains it', async () => {
    expect(sim.stalledStreams()).toEqual({ streams: 0, tokensWritten: 0 });
    const body = { model: 'sim-model', stream: true, max_tokens: TOKENS, ignore_eos: true, messages: CHAT };
    const { res, chunks: read } = await stalledStream(`${sim.url}/v1/chat/completions`, body);
    await waitFor(() => sim.stalledStreams().streams === 1, { what: 'the stream to wait for its reader' });
    const { tokensWritten } = sim.stalledStreams();
    expect(tokensWritten).toBeGreaterThan(0);
    expect(tokensWritten).toBeLessThan(TOKENS);

    res.resume();
    await new Promise<void>((resolve, reject) => {
      res.once('end', resolve);
      res.once('error', reject);
    });
    const events = sseEvents(Buffer.concat(read).toString('utf8'));
    expect(events.at(-1)).toBe('[DONE]');
    // One chunk per token carries text (the opening chunk's is "", the finish chunk's null).
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as { choices: { delta: { content: string | null } }[] });
    expect(chunks.filter((c) => c.choices[0].delta.content)).toHaveLength(TOKENS);
    expect(sim.stalledStreams()).toEqual({ streams: 0, tokensWritten: 0 });
  });

  it('ends the wait when the reader leaves', async () => {
    const body = { model: 'sim-model', stream: true, max_tokens: TOKENS, ignore_eos: true, messages: CHAT };
    const aborted = sim.counters()['aborted'];
    const { res } = await stalledStream(`${sim.url}/v1/chat/completions`, body);
    await waitFor(() => sim.stalledStreams().streams === 1, { what: 'the stream to wait for its reader' });
    res.destroy();
    await waitFor(() => sim.counters()['aborted'] === aborted + 1, { what: 'the stream aborted' });
    expect(sim.stalledStreams()).toEqual({ streams: 0, tokensWritten: 0 });
  });
});
