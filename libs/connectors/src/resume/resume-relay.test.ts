import type { ProxyRequest } from '@triad/request';
import { resumeRefusal } from './eligibility';
import { ResumeRelay } from './resume-relay';
import { ResumeState } from './resume-state';
import { StreamResume } from './stream-resume';

const usage = (p: number, c: number) => ({ prompt_tokens: p, total_tokens: p + c, completion_tokens: c });
const chunk = (id: string, delta: Record<string, unknown>, u?: ReturnType<typeof usage>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: id === 'a' ? 1 : 2, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }], ...(u ? { usage: u } : {}) })}\n\n`;
const usageChunk = (id: string, u: ReturnType<typeof usage>) =>
  `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 2, model: 'm', choices: [], usage: u })}\n\n`;

function events(out: string): Record<string, unknown>[] {
  return out
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)) as Record<string, unknown>);
}

describe('ResumeRelay', () => {
  it('keeps a multi-byte character whole when a network chunk ends inside it', () => {
    const state = new ResumeState(true, true, false);
    const relay = new ResumeRelay(state);
    const bytes = Buffer.from(chunk('a', { content: 'é漢😀' }, usage(10, 1)));
    const cut = bytes.indexOf(Buffer.from('漢')) + 1;
    const out = relay.push(bytes.subarray(0, cut)).toString() + relay.push(bytes.subarray(cut)).toString();
    expect(state.text).toBe('é漢😀');
    expect(events(out)[0]).toMatchObject({ choices: [{ delta: { content: 'é漢😀' } }] });
  });

  it('writes the engine bytes as they came when nothing in them has to change', () => {
    const state = new ResumeState(true, true, true);
    const relay = new ResumeRelay(state);
    const bytes = Buffer.from(chunk('a', { role: 'assistant', content: '' }, usage(10, 0)) + chunk('a', { content: ' one' }, usage(10, 1)));
    expect(relay.push(bytes)).toBe(bytes);
    expect(state.text).toBe(' one');
  });

  it('reads the text and token counts, and removes per-chunk usage the client did not ask for', () => {
    const state = new ResumeState(true, true, false);
    const relay = new ResumeRelay(state);
    const first = chunk('a', { role: 'assistant', content: '' }, usage(10, 0)) + chunk('a', { content: ' one' }, usage(10, 1));
    // Split mid-event: nothing of the second event goes out until it is complete.
    const out1 = relay.push(Buffer.from(first.slice(0, first.length - 5))).toString();
    const out2 = relay.push(Buffer.from(first.slice(first.length - 5) + chunk('a', { content: ' two' }, usage(10, 2)))).toString();
    const all = events(out1 + out2);
    expect(all).toHaveLength(3);
    expect(all.every((e) => !('usage' in e))).toBe(true);
    expect(state.text).toBe(' one two');
    expect(state.tokens).toBe(2);
    expect(state.promptTokens).toBe(10);
    expect(relay.incomplete()?.message).toContain('[DONE]');
  });

  it('splices a continuation: the first id, no second role chunk, usage counting the client prompt once and every token sent', () => {
    const state = new ResumeState(true, true, false);
    const first = new ResumeRelay(state);
    first.push(Buffer.from(chunk('a', { role: 'assistant', content: '' }, usage(10, 0)) + chunk('a', { content: ' one' }, usage(10, 1))));
    state.resumes = 1;
    const cont = new ResumeRelay(state);
    const out = cont
      .push(
        Buffer.from(
          chunk('b', { role: 'assistant', content: '' }, usage(12, 0)) +
            chunk('b', { content: ' two' }, usage(12, 1), 'length') +
            usageChunk('b', usage(12, 1)) +
            'data: [DONE]\n\n',
        ),
      )
      .toString();
    const all = events(out);
    expect(all.map((e) => [e['id'], e['created']])).toEqual([
      ['a', 1],
      ['a', 1],
    ]);
    expect(all[1]?.['usage']).toEqual(usage(10, 2));
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(cont.usage).toEqual({ promptTokens: 10, completionTokens: 2 });
    expect(cont.incomplete()).toBeUndefined();
    expect(state.text).toBe(' one two');
    expect(state.finishReason).toBe('length');
  });

  it('marks tool-call and reasoning deltas and engine error events as not resumable', () => {
    const tools = new ResumeState(true, false, false);
    new ResumeRelay(tools).push(Buffer.from(chunk('a', { tool_calls: [{ index: 0, function: { arguments: '{' } }] })));
    expect(tools.unresumable).toBe('tool_calls');
    const reasoning = new ResumeState(true, false, false);
    new ResumeRelay(reasoning).push(Buffer.from(chunk('a', { reasoning_content: 'hmm' })));
    expect(reasoning.unresumable).toBe('reasoning');
    const failed = new ResumeState(true, false, false);
    new ResumeRelay(failed).push(Buffer.from('data: {"error":{"message":"x","code":500}}\n\n'));
    expect(failed.unresumable).toBe('engine_error');
  });
});

describe('resumeRefusal', () => {
  const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true };
  it.each([
    [{ n: 2 }, 'n'],
    [{ logprobs: true }, 'logprobs'],
    [{ top_logprobs: 3 }, 'logprobs'],
    [{ tools: [{ type: 'function', function: { name: 'f' } }] }, 'tools'],
    [{ response_format: { type: 'json_object' } }, 'structured_output'],
    [{ guided_json: {} }, 'structured_output'],
    [{ continue_final_message: true }, 'continued_by_client'],
  ])('refuses %j (%s)', (extra, reason) => {
    expect(resumeRefusal('/v1/chat/completions', { ...chat, ...extra })).toBe(reason);
  });

  it('accepts plain text chats and string completion prompts, tools the client turned off, and n 1', () => {
    expect(resumeRefusal('/v1/chat/completions', chat)).toBeUndefined();
    expect(resumeRefusal('/v1/chat/completions', { ...chat, n: 1, tools: [{ type: 'function' }], tool_choice: 'none' })).toBeUndefined();
    expect(resumeRefusal('/v1/completions', { model: 'm', prompt: 'x', stream: true })).toBeUndefined();
    expect(resumeRefusal('/v1/completions', { model: 'm', prompt: 'x', logprobs: 0 })).toBe('logprobs');
    expect(resumeRefusal('/v1/completions', { model: 'm', prompt: ['x', 'y'] })).toBe('prompt');
    expect(resumeRefusal('/v1/responses', { model: 'm' })).toBe('path');
  });
});

describe('StreamResume', () => {
  const ctxOf = (body: Record<string, unknown>) =>
    ({
      path: '/v1/chat/completions',
      stream: true,
      body,
      routing: { server: { kind: 'engine', engine: 'vLLM', streamResume: { maxTokens: 3, maxBytes: 1000, maxResumes: 1 } } },
      proxy: { injectUsage: true },
    }) as unknown as ProxyRequest;

  it('builds the continuation, counts a continuation that failed before writing as silent, and keeps to the limits', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 10, seed: 3 };
    const resume = StreamResume.of(ctxOf(body)) as StreamResume;
    expect(resume.legBody(body)['stream_options']).toEqual({ include_usage: true, continuous_usage_stats: true });
    resume
      .relay()
      .push(Buffer.from(chunk('a', { role: 'assistant', content: '' }, usage(5, 0)) + chunk('a', { content: ' x' }, usage(5, 1))));
    expect(resume.broke(true)).toEqual({ kind: 'resume' });
    expect(resume.continuationSilent).toBe(true);
    const next = resume.legBody(body);
    expect(next['messages']).toEqual([...body.messages, { role: 'assistant', content: ' x' }]);
    expect([next['continue_final_message'], next['add_generation_prompt'], next['max_tokens'], next['seed']]).toEqual([true, false, 9, 3]);
    resume.relay().push(Buffer.from(chunk('b', { content: ' y' }, usage(7, 1))));
    expect(resume.continuationSilent).toBe(false);
    // A second break: maxResumes is 1.
    expect(resume.broke(true)).toEqual({ kind: 'refuse', reason: 'max_resumes' });
    expect(resume.outcome).toBe('failed');
  });

  it('refuses past maxTokens, and without another attempt', () => {
    const body = { model: 'm', messages: [], stream: true };
    const many = StreamResume.of(ctxOf(body)) as StreamResume;
    many.relay().push(Buffer.from(chunk('a', { content: ' a b c d' }, usage(5, 4))));
    expect(many.broke(true)).toEqual({ kind: 'refuse', reason: 'max_tokens' });
    const last = StreamResume.of(ctxOf(body)) as StreamResume;
    last.relay().push(Buffer.from(chunk('a', { content: ' a' }, usage(5, 1))));
    expect(last.broke(false)).toEqual({ kind: 'refuse', reason: 'no_alternate' });
    expect(last.outcome).toBe('refused');
  });
});
