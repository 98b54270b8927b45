import type { ProxyRequest } from '@triad/request';
import { StreamResume } from './stream-resume';

/** A chat chunk with per-chunk usage (what the final legs ask the engine for). */
const chunk = (content: string, completion: number, finish: string | null = null) =>
  `data: ${JSON.stringify({
    id: 'a',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta: { content }, finish_reason: finish }],
    usage: { prompt_tokens: 5, completion_tokens: completion, total_tokens: 5 + completion },
  })}\n\n`;

/** The request as the planner hands it over: whether the client wants usage is the planner's call, made once. */
const ctxOf = (clientWantsUsage: boolean) =>
  ({
    path: '/v1/chat/completions',
    stream: true,
    // The body says nothing about usage: the resume follows the planner's answer, not its own reading of it.
    body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true },
    routing: { server: { kind: 'engine', engine: 'vLLM', streamResume: { maxTokens: 100, maxBytes: 10_000, maxResumes: 1 } } },
    proxy: { injectUsage: true, clientWantsUsage },
  }) as unknown as ProxyRequest;

describe('StreamResume: the closing events of an answer that broke after its last chunk', () => {
  it('adds the usage event when the planner says the client asked for usage, and not otherwise', () => {
    for (const wants of [true, false]) {
      const resume = StreamResume.of(ctxOf(wants)) as StreamResume;
      resume.relay().push(Buffer.from(chunk(' x', 1) + chunk('', 1, 'stop')));
      const step = resume.broke(true);
      expect(step.kind).toBe('complete');
      const tail = step.kind === 'complete' ? step.tail.toString() : '';
      expect(tail.endsWith('data: [DONE]\n\n')).toBe(true);
      expect(tail.includes('"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}')).toBe(wants);
    }
  });
});
