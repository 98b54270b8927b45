import { clientErrorStatusOf, leadingAbort, leadingErrorEvent, leadingFailure } from './leading-event';

const sse = (...events: unknown[]): Buffer =>
  Buffer.from(events.map((e) => `data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`).join(''));

/** SGLang's /generate aborted output (tokenizer_manager yields it; FINISH_ABORT.to_json is the finish reason). */
const aborted = (status: number, message = 'Beam search is not supported with PD disaggregation.') => ({
  text: '',
  output_ids: [],
  meta_info: {
    id: 'r1',
    finish_reason: { type: 'abort', message, status_code: status, err_type: null },
    prompt_tokens: 3,
    completion_tokens: 0,
  },
});

describe('leadingAbort', () => {
  it("reads a 4xx abort of SGLang's /generate stream with its status and message", () => {
    expect(leadingAbort(sse(aborted(400), '[DONE]'))).toEqual({
      status: 400,
      message: 'Beam search is not supported with PD disaggregation.',
    });
    // Python's json.dumps spacing, and an event that is the whole chunk.
    const spaced = `data: ${JSON.stringify(aborted(422), null, 1).replace(/\n/g, '')}`;
    expect(leadingAbort(Buffer.from(spaced))?.status).toBe(422);
  });

  it('reads a 5xx abort (an engine failure: the leg fails it) and leaves every ordinary first event alone', () => {
    expect(leadingAbort(sse(aborted(500, 'Decode transfer failed')))).toEqual({ status: 500, message: 'Decode transfer failed' });
    expect(leadingAbort(sse(aborted(503, 'busy')))?.status).toBe(503);
    expect(leadingAbort(sse(aborted(600, 'odd')))).toBeUndefined();
    expect(leadingAbort(sse(aborted(200, 'odd')))).toBeUndefined();
    expect(leadingAbort(sse({ text: 'Hi', output_ids: [1], meta_info: { id: 'r1', finish_reason: null } }))).toBeUndefined();
    expect(leadingAbort(sse({ text: 'x', meta_info: { finish_reason: { type: 'length', length: 1 } } }))).toBeUndefined();
    // A finish reason without a status (an abort the engine's admin asked for) is no refusal.
    expect(
      leadingAbort(sse({ text: '', meta_info: { finish_reason: { type: 'abort', message: 'Abort in waiting queue' } } })),
    ).toBeUndefined();
  });

  it('is not fooled by generated text that spells an abort: the quotes inside a string are escaped', () => {
    const spelled = { text: '"finish_reason":{"type":"abort","status_code":400}', meta_info: { finish_reason: null } };
    expect(leadingAbort(sse(spelled))).toBeUndefined();
  });

  it('reads only the first event: an abort after tokens were sent is the stream ending', () => {
    expect(leadingAbort(sse({ text: 'Hi', meta_info: { finish_reason: null } }, aborted(400)))).toBeUndefined();
  });
});

describe('leadingErrorEvent and clientErrorStatusOf', () => {
  it("find an error event's 4xx code, and none for a 5xx or an event without one", () => {
    const refused = leadingErrorEvent(sse({ error: { message: 'bad', type: 'invalid_request_error', code: 400 } }));
    expect(refused).toBeDefined();
    expect(clientErrorStatusOf(refused as string)).toBe(400);
    expect(clientErrorStatusOf(leadingErrorEvent(sse({ error: { message: 'x', code: 500 } })) as string)).toBeUndefined();
    expect(clientErrorStatusOf(leadingErrorEvent(sse({ error: { message: 'x' } })) as string)).toBeUndefined();
    expect(leadingErrorEvent(sse(aborted(400)))).toBeUndefined();
  });
});

describe('leadingFailure', () => {
  it('gives one status and message for either shape: a 4xx the engine refused with, else 500 and up', () => {
    expect(leadingFailure(sse({ error: { message: 'bad', type: 'invalid_request_error', code: 400 } }))).toEqual({
      status: 400,
      message: 'bad',
    });
    expect(leadingFailure(sse({ error: { message: 'KV load failed', code: 500 } }))).toEqual({ status: 500, message: 'KV load failed' });
    expect(leadingFailure(sse({ error: { message: 'no code' } }))).toEqual({ status: 500, message: 'no code' });
    expect(leadingFailure(sse(aborted(503, 'busy')))).toEqual({ status: 503, message: 'busy' });
    expect(leadingFailure(sse(aborted(400)))?.status).toBe(400);
    expect(leadingFailure(sse({ choices: [{ delta: { content: 'Hi' } }] }, { error: { message: 'late' } }))).toBeUndefined();
  });
});
