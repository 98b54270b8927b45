import { mergeSampleAnswers, SampleStreamError, SampleStreamMerger, singleSampleBody } from './parallel-samples';

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const event = (v: unknown) => Buffer.from(`data: ${JSON.stringify(v)}\n\n`);

/** The `data:` payloads of an SSE text, parsed (`[DONE]` kept as the string). */
function payloads(text: string): unknown[] {
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice('data: '.length))
    .map((d) => (d === '[DONE]' ? d : (JSON.parse(d) as unknown)));
}

describe('singleSampleBody', () => {
  it('asks each sample for one, leaving the rest of the body as it is', () => {
    expect(singleSampleBody({ n: 3, max_tokens: 4 })).toEqual({ n: 1, max_tokens: 4 });
    expect(singleSampleBody({ text: 'a', sampling_params: { n: 3, max_new_tokens: 2 } })).toEqual({
      text: 'a',
      sampling_params: { n: 1, max_new_tokens: 2 },
    });
    // Per-prompt sampling params: every entry asks for one (SGLang takes n from them all alike).
    expect(singleSampleBody({ text: ['a', 'b'], sampling_params: [{ n: 3, max_new_tokens: 2 }, { n: 3 }] })).toEqual({
      text: ['a', 'b'],
      sampling_params: [{ n: 1, max_new_tokens: 2 }, { n: 1 }],
    });
    expect(singleSampleBody({ text: 'a', sampling_params: { max_new_tokens: 2 } })).toEqual({
      text: 'a',
      sampling_params: { max_new_tokens: 2 },
    });
  });
});

describe('mergeSampleAnswers', () => {
  const answer = (id: string, text: string, completion: number) => ({
    id,
    object: 'chat.completion',
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' }],
    usage: { prompt_tokens: 7, completion_tokens: completion, total_tokens: 7 + completion, prompt_tokens_details: { cached_tokens: 2 } },
  });

  it('makes n chat answers one: choices 0..n-1, the first id, the prompt counted once and completions summed', () => {
    const { body, usage } = mergeSampleAnswers([json(answer('a', 'x', 2)), json(answer('b', 'y', 3)), json(answer('c', 'z', 4))]);
    expect(usage).toEqual({ promptTokens: 7, completionTokens: 9 });
    const merged = JSON.parse(body.toString());
    expect(merged.id).toBe('a');
    expect(merged.choices.map((c: { index: number; message: { content: string } }) => [c.index, c.message.content])).toEqual([
      [0, 'x'],
      [1, 'y'],
      [2, 'z'],
    ]);
    expect(merged.usage).toEqual({ prompt_tokens: 7, completion_tokens: 9, total_tokens: 16, prompt_tokens_details: { cached_tokens: 2 } });
  });

  it("orders a completions prompt list's choices prompt-major, as OpenAI does (prompt i, sample j at i*n+j)", () => {
    const sample = (j: number) =>
      json({
        id: `s${j}`,
        choices: [
          { index: 0, text: `p0s${j}` },
          { index: 1, text: `p1s${j}` },
        ],
      });
    const merged = JSON.parse(mergeSampleAnswers([sample(0), sample(1)]).body.toString());
    expect(merged.choices.map((c: { index: number; text: string }) => `${c.index}:${c.text}`)).toEqual([
      '0:p0s0',
      '1:p0s1',
      '2:p1s0',
      '3:p1s1',
    ]);
    expect(merged).not.toHaveProperty('usage');
  });

  it("answers /generate as SGLang answers n > 1: a list of the samples, a batch's prompt-major", () => {
    const one = (t: string) => ({ text: t, meta_info: { prompt_tokens: 3, completion_tokens: 1 } });
    const single = mergeSampleAnswers([json(one('a')), json(one('b'))]);
    expect(JSON.parse(single.body.toString())).toEqual([one('a'), one('b')]);
    expect(single.usage).toEqual({ promptTokens: 3, completionTokens: 2 }); // the prompt once
    const batch = (j: number) => json([one(`p0s${j}`), one(`p1s${j}`)]);
    const merged = mergeSampleAnswers([batch(0), batch(1)]);
    expect((JSON.parse(merged.body.toString()) as { text: string }[]).map((m) => m.text)).toEqual(['p0s0', 'p0s1', 'p1s0', 'p1s1']);
    expect(merged.usage).toEqual({ promptTokens: 6, completionTokens: 4 }); // each prompt once
  });
});

describe('SampleStreamMerger', () => {
  const chunk = (id: string, content: string) => ({
    id,
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
    usage: null,
  });
  const usageChunk = (id: string, completion: number) => ({
    id,
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [],
    usage: { prompt_tokens: 5, completion_tokens: completion, total_tokens: 5 + completion },
  });

  it('interleaves the samples re-indexed under one id, and ends with one usage chunk and one [DONE]', () => {
    const m = new SampleStreamMerger(2, true);
    let out = '';
    out += m.push(1, event(chunk('b', 'y'))).toString();
    out += m.push(0, event(chunk('a', 'x'))).toString();
    // A chunk cut mid-event comes out once its event is complete.
    const split = event(usageChunk('b', 3));
    expect(m.push(1, split.subarray(0, 10)).length).toBe(0);
    out += m.push(1, Buffer.concat([split.subarray(10), Buffer.from('data: [DONE]\n\n')])).toString();
    out += m.push(0, Buffer.concat([event(usageChunk('a', 2)), Buffer.from('data: [DONE]\n\n')])).toString();
    out += m.end().toString();
    const head = { id: 'b', object: 'chat.completion.chunk', created: 1, model: 'm' };
    expect(payloads(out)).toEqual([
      { ...head, choices: [{ index: 1, delta: { content: 'y' }, finish_reason: null }] },
      { ...head, choices: [{ index: 0, delta: { content: 'x' }, finish_reason: null }] },
      { ...head, choices: [], usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } },
      '[DONE]',
    ]);
    expect(m.usage).toEqual({ promptTokens: 5, completionTokens: 5 });
  });

  it('keeps the usage chunk back when the client did not ask for it, and still counts the tokens', () => {
    const m = new SampleStreamMerger(2, false);
    let out = m.push(0, Buffer.concat([event(chunk('a', 'x')), event(usageChunk('a', 1))])).toString();
    out += m.push(1, Buffer.concat([event(chunk('b', 'y')), event(usageChunk('b', 4))])).toString();
    out += m.end().toString();
    expect(payloads(out).slice(-2)).toEqual([expect.objectContaining({ choices: [expect.objectContaining({ index: 1 })] }), '[DONE]']);
    expect(m.usage).toEqual({ promptTokens: 5, completionTokens: 5 });
  });

  it("gives /generate events SGLang's sample index and counts each prompt once from meta_info", () => {
    const m = new SampleStreamMerger(3, false);
    const gen = (text: string, completion: number) => ({ text, meta_info: { prompt_tokens: 4, completion_tokens: completion } });
    let out = '';
    for (const j of [2, 0, 1])
      out += m.push(j, Buffer.concat([event(gen('t', 1)), event(gen('tt', 2)), Buffer.from('data: [DONE]\n\n')])).toString();
    out += m.end().toString();
    const events = payloads(out);
    expect(events.slice(0, -1).map((e) => (e as { index: number }).index)).toEqual([2, 2, 0, 0, 1, 1]);
    expect(events.at(-1)).toBe('[DONE]');
    expect(m.usage).toEqual({ promptTokens: 4, completionTokens: 6 });
  });

  it('throws the error event of a sample, with the status the engine named', () => {
    const m = new SampleStreamMerger(2, false);
    let thrown: unknown;
    try {
      m.push(1, event({ error: { message: 'boom', code: 400 } }));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(SampleStreamError);
    expect(thrown).toMatchObject({ message: 'boom', status: 400 });
    expect(() => m.push(0, event({ error: { message: 'late' } }))).toThrow(expect.objectContaining({ status: 500 }));
  });

  it("throws a /generate sample's aborted output with its status_code, and relays other finish reasons", () => {
    const m = new SampleStreamMerger(2, false);
    const abort = (status: number) => ({
      text: '',
      output_ids: [],
      meta_info: { id: 'r', finish_reason: { type: 'abort', message: 'Decode transfer failed', status_code: status } },
    });
    expect(() => m.push(1, event(abort(500)))).toThrow(expect.objectContaining({ message: 'Decode transfer failed', status: 500 }));
    expect(() => new SampleStreamMerger(2, false).push(0, event(abort(400)))).toThrow(expect.objectContaining({ status: 400 }));
    const done = { text: 'x', meta_info: { id: 'r', finish_reason: { type: 'length', length: 1 }, completion_tokens: 1 } };
    expect(payloads(new SampleStreamMerger(2, false).push(0, event(done)).toString())).toHaveLength(1);
  });
});
