import type { SimEngineHandle } from '../src/options';
import { CHAT, post, SimFleet } from './helpers';

// vLLM's --sse-keep-alive-interval: a streamed answer that writes nothing for the interval gets a comment.
describe('vLLM simulator: SSE keep-alive comments', () => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;
  let chatUrl: string;
  const chat = (extra: Record<string, unknown> = {}) => ({ model: 'sim-model', messages: CHAT, max_tokens: 3, ...extra });

  beforeAll(async () => {
    sim = await fleet.start({
      engine: 'vllm',
      role: 'both',
      admin: true,
      sseKeepAliveIntervalMs: 5,
      latencyProfile: 'realistic',
      latency: { decodeMsPerToken: 40 },
    });
    chatUrl = `${sim.url}/v1/chat/completions`;
  });
  afterEach(() => sim.setFault({ mode: 'ok' }));
  afterAll(() => fleet.closeAll());

  it('writes comments between the tokens of an idle stream, never inside an event', async () => {
    const res = await post(chatUrl, chat({ stream: true }));
    expect(res.status).toBe(200);
    const events = res.text.split('\n\n').filter(Boolean);
    expect(events).toContain(': keep-alive');
    expect(events.filter((e) => e.startsWith('data: {"id"'))).toHaveLength(4); // the role chunk, 3 tokens (the last with its finish)
    expect(events.every((e) => e === ': keep-alive' || e.startsWith('data: '))).toBe(true);
    expect(events.at(-1)).toBe('data: [DONE]');
  });

  it('keeps an open stream alive before its first event too (here one that then fails)', async () => {
    sim.setFault({ mode: 'error-in-stream', count: 1, delayMs: 60 });
    const res = await post(chatUrl, chat({ stream: true }));
    const events = res.text.split('\n\n').filter(Boolean);
    expect(events[0]).toBe(': keep-alive');
    expect(events.at(-2)).toMatch(/^data: \{"error":\{"message":"Internal server error"/);
  });

  it('leaves answers that are not streamed alone', async () => {
    const res = await post(chatUrl, chat());
    expect(res.status).toBe(200);
    expect(res.text).not.toContain('keep-alive');
    expect(() => JSON.parse(res.text)).not.toThrow();
  });
});
