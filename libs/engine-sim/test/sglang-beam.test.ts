import type { SimEngineHandle } from '@triad/engine-sim';
import { post, SimFleet, sseEvents } from './helpers';

interface BeamResult {
  output_ids: number[];
  text: string;
  meta_info: Record<string, unknown> & { finish_reason: { type: string; length?: number }; sequence_score: number };
}

interface BeamOut {
  text: string;
  output_ids: number[];
  meta_info: {
    id: string;
    finish_reason: { type: string };
    prompt_tokens: number;
    completion_tokens: number;
    sequence_score: number;
    beam_results: BeamResult[];
  };
  index?: number;
}

/** A PD body written as raw JSON, so the room keeps every digit. */
function raw(fields: Record<string, unknown>, host: string, port: number, room: string): string {
  const head = Object.entries(fields)
    .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
    .join(',');
  return `{${head},"bootstrap_host":${JSON.stringify(host)},"bootstrap_port":${port},"bootstrap_room":${room}}`;
}

describe('SGLang simulator: beam search on /generate', () => {
  const fleet = new SimFleet();
  let unified: SimEngineHandle;
  let prefill: SimEngineHandle;
  let decode: SimEngineHandle;

  beforeAll(async () => {
    unified = await fleet.start({ engine: 'sglang', role: 'both', host: '127.0.0.41' });
    prefill = await fleet.start({ engine: 'sglang', role: 'prefill', host: '127.0.0.42' });
    decode = await fleet.start({ engine: 'sglang', role: 'decode', host: '127.0.0.43', bootstrapTimeoutMs: 60_000 });
  });
  afterAll(() => fleet.closeAll());

  it('answers one object with the n best beams, the best on top, completion_tokens summed and the prompt once', async () => {
    const body = { text: 'The capital of France is', rid: 'beam-1', sampling_params: { beam_width: 4, n: 3, max_new_tokens: 5 } };
    const res = await post(`${unified.url}/generate`, body);
    expect(res.status).toBe(200);
    const out = res.json<BeamOut>();
    const beams = out.meta_info.beam_results;
    expect(beams).toHaveLength(3);
    expect(beams.map((b) => b.output_ids.length)).toEqual([5, 5, 5]);
    expect(new Set(beams.map((b) => b.text)).size).toBe(3);
    expect(out.text).toBe(beams[0].text);
    expect(out.output_ids).toEqual(beams[0].output_ids);
    expect(out.meta_info).toMatchObject({ id: 'beam-1', completion_tokens: 15, finish_reason: { type: 'length', length: 5 } });
    expect(out.meta_info.prompt_tokens).toBeGreaterThan(0);
    // Best first; the best beam's meta_info is the full one, the others carry their finish reason and score only.
    const scores = beams.map((b) => b.meta_info.sequence_score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    expect(out.meta_info.sequence_score).toBe(scores[0]);
    expect(beams[0].meta_info).toMatchObject({ id: 'beam-1', completion_tokens: 15, prompt_tokens: out.meta_info.prompt_tokens });
    expect(beams[0].meta_info['beam_results']).toBeUndefined();
    expect(Object.keys(beams[1].meta_info).sort()).toEqual(['finish_reason', 'sequence_score']);
    // The best beam is the output the prompt gets without beam search.
    const plain = await post(`${unified.url}/generate`, { text: 'The capital of France is', sampling_params: { max_new_tokens: 5 } });
    expect(plain.json<{ text: string }>().text).toBe(out.text);
  });

  it('returns one beam by default (n = 1), and does not expand n into parallel samples', async () => {
    const res = await post(`${unified.url}/generate`, { text: 'Hello', sampling_params: { beam_width: 2, max_new_tokens: 3 } });
    const out = res.json<BeamOut>();
    expect(Array.isArray(out)).toBe(false);
    expect(out.meta_info.beam_results).toHaveLength(1);
    expect(out.meta_info.completion_tokens).toBe(3);
  });

  it('streams only the final answer: one event, then [DONE]', async () => {
    const body = { text: 'Hello', stream: true, sampling_params: { beam_width: 3, n: 2, max_new_tokens: 20 } };
    const res = await post(`${unified.url}/generate`, body);
    expect(res.status).toBe(200);
    const events = sseEvents(res.text);
    expect(events).toHaveLength(2);
    expect(events[1]).toBe('[DONE]');
    const out = JSON.parse(events[0]) as BeamOut;
    expect(out.meta_info.beam_results).toHaveLength(2);
    expect(out.meta_info.completion_tokens).toBe(40);
  });

  it('answers a batch with one beam object per prompt', async () => {
    const body = { text: ['a b', 'c d e'], sampling_params: { beam_width: 2, n: 2, max_new_tokens: 2 } };
    const out = (await post(`${unified.url}/generate`, body)).json<BeamOut[]>();
    expect(out).toHaveLength(2);
    expect(out.map((o) => [o.meta_info.beam_results.length, o.meta_info.completion_tokens])).toEqual([
      [2, 4],
      [2, 4],
    ]);
    const streamed = await post(`${unified.url}/generate`, { ...body, stream: true });
    const events = sseEvents(streamed.text);
    expect(events.at(-1)).toBe('[DONE]');
    const indexed = events.slice(0, -1).map((e) => JSON.parse(e) as BeamOut);
    expect(indexed.map((o) => o.index).sort()).toEqual([0, 1]);
  });

  it("refuses n > beam_width with the scheduler's 400 (in the stream once streaming)", async () => {
    const body = { text: 'Hello', sampling_params: { beam_width: 2, n: 3 } };
    const res = await post(`${unified.url}/generate`, body);
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({ error: { message: 'n (3) cannot exceed beam_width (2).' } });
    const streamed = await post(`${unified.url}/generate`, { ...body, stream: true });
    expect(streamed.status).toBe(200);
    const events = sseEvents(streamed.text);
    expect(events).toHaveLength(2);
    const finish = { type: 'abort', message: 'n (3) cannot exceed beam_width (2).', status_code: 400, err_type: null };
    expect(JSON.parse(events[0])).toMatchObject({ text: '', output_ids: [], meta_info: { finish_reason: finish } });
    expect(events[1]).toBe('[DONE]');
  });

  it('leaves beam_width 1 a plain request, and n > 1 parallel samples', async () => {
    const out = (
      await post(`${unified.url}/generate`, { text: 'Hello', sampling_params: { beam_width: 1, n: 2, max_new_tokens: 2 } })
    ).json<{ meta_info: Record<string, unknown> }[]>();
    expect(out).toHaveLength(2);
    expect(out[0].meta_info['beam_results']).toBeUndefined();
  });

  it.each([
    ['prefill', () => prefill],
    ['decode', () => decode],
  ])('%s refuses a beam search at once with the 400 of a PD server', async (_role, sim) => {
    const fields = { text: 'Hello', sampling_params: { beam_width: 2, n: 2, max_new_tokens: 3 } };
    const before = sim().counters()['badRequests'] ?? 0;
    const res = await post(`${sim().url}/generate`, raw(fields, prefill.host, prefill.bootstrapPort!, '31'));
    expect(res.status).toBe(400);
    expect(res.json()).toEqual({ error: { message: 'Beam search is not supported with PD disaggregation.' } });
    expect(sim().counters()['badRequests']).toBe(before + 1);
    // Even where n exceeds beam_width: the PD check comes first.
    const over = await post(`${sim().url}/generate`, raw({ ...fields, sampling_params: { beam_width: 2, n: 5 } }, prefill.host, 1, '32'));
    expect(over.json()).toEqual({ error: { message: 'Beam search is not supported with PD disaggregation.' } });
  });
});
