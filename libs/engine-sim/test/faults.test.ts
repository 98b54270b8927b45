import type { EngineKind, SimEngineHandle } from '../src/options';
import { waitFor } from '@triad/testing';
import { CHAT, get, post, rawPost, SimFleet } from './helpers';

const engines: EngineKind[] = ['vllm', 'sglang'];

describe.each(engines)('%s simulator: fault injection', (engine) => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;
  let chatUrl: string;
  const chat = (extra: Record<string, unknown> = {}) => ({ model: 'sim-model', messages: CHAT, max_tokens: 6, ...extra });

  beforeAll(async () => {
    sim = await fleet.start({ engine, role: 'both', admin: true });
    chatUrl = `${sim.url}/v1/chat/completions`;
  });
  afterEach(() => sim.setFault({ mode: 'ok' }));
  afterAll(() => fleet.closeAll());

  it('error500 answers 500 in the engine error shape for COUNT requests, then recovers', async () => {
    sim.setFault({ mode: 'error500', count: 2 });
    const a = await post(chatUrl, chat());
    const b = await post(chatUrl, chat());
    const c = await post(chatUrl, chat());
    expect([a.status, b.status, c.status]).toEqual([500, 500, 200]);
    const err = a.json<Record<string, unknown>>();
    if (engine === 'vllm')
      expect(err).toEqual({
        error: {
          message: expect.any(String),
          type: 'InternalServerError',
          param: null,
          code: 500,
        },
      });
    else expect(err).toEqual({ object: 'error', message: expect.any(String), type: 'InternalServerError', param: null, code: 500 });
  });

  it('error-in-stream fails the request after the stream opened: 200, the error as the first event, [DONE]; 500 unstreamed', async () => {
    sim.setFault({ mode: 'error-in-stream', count: 3 });
    const streamed = await post(chatUrl, chat({ stream: true }));
    expect(streamed.status).toBe(200);
    const events = streamed.text.split('\n\n').filter(Boolean);
    expect(events).toHaveLength(2);
    expect(events[1]).toBe('data: [DONE]');
    const { error } = JSON.parse(events[0].slice('data: '.length)) as { error: { code: number; message: string } };
    expect(error.code).toBe(500);
    expect(error.message).toBe(engine === 'vllm' ? 'Internal server error' : 'simulated engine failure (fault error-in-stream)');
    expect((await post(chatUrl, chat())).status).toBe(500);
    if (engine === 'sglang') {
      // /generate: the aborted output, its finish reason carrying the status.
      const generated = await post(`${sim.url}/generate`, { text: 'Hi', stream: true, sampling_params: { max_new_tokens: 2 } });
      expect(generated.status).toBe(200);
      const [first, done] = generated.text.split('\n\n').filter(Boolean);
      expect(done).toBe('data: [DONE]');
      expect(JSON.parse(first.slice('data: '.length))).toMatchObject({
        text: '',
        meta_info: { finish_reason: { type: 'abort', status_code: 500 } },
      });
    } else sim.setFault({ mode: 'ok' });
    expect((await post(chatUrl, chat({ stream: true }))).text).toContain('"finish_reason":"length"');
  });

  it('error429 answers 429 with Retry-After', async () => {
    sim.setFault({ mode: 'error429', count: 1 });
    const res = await post(chatUrl, chat());
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('1');
  });

  it('hang never answers (while other requests still do)', async () => {
    sim.setFault({ mode: 'hang', count: 1 });
    const abort = new AbortController();
    let settled = false;
    const hanging = rawPost(chatUrl, chat({ seed: 991 }), abort.signal).then((r) => {
      settled = true;
      return r;
    });
    await waitFor(() => sim.requests().some((r) => (r.body as { seed?: number } | undefined)?.seed === 991), {
      what: 'hanging request to arrive',
    });
    // A request accepted after the hanging one is answered; the hanging one still is not.
    expect((await post(chatUrl, chat())).status).toBe(200);
    expect(settled).toBe(false);
    abort.abort();
    expect((await hanging).complete).toBe(false);
  });

  it('die-mid-stream drops the connection after part of a stream, without [DONE]', async () => {
    sim.setFault({ mode: 'die-mid-stream', count: 1 });
    const res = await rawPost(chatUrl, chat({ stream: true }));
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false);
    expect(res.body.startsWith('data: {')).toBe(true);
    expect(res.body).not.toContain('[DONE]');
    expect((await post(chatUrl, chat({ stream: true }))).text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('die-mid-stream cuts a non-streamed body short of its content-length', async () => {
    sim.setFault({ mode: 'die-mid-stream', count: 1 });
    const res = await rawPost(chatUrl, chat());
    expect(res.complete).toBe(false);
    expect(() => JSON.parse(res.body)).toThrow();
  });

  it('slow-first-byte still answers completely', async () => {
    sim.setFault({ mode: 'slow-first-byte', count: 1, delayMs: 30 });
    const before = sim.counters()['faultsInjected'];
    const res = await post(chatUrl, chat({ stream: true }));
    expect(res.text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(sim.counters()['faultsInjected']).toBe(before + 1);
  });

  it('refuse resets the connection without an answer', async () => {
    sim.setFault({ mode: 'refuse', count: 1 });
    const res = await rawPost(chatUrl, chat());
    expect(res.status).toBeUndefined();
    expect(res.error).toBeDefined();
    expect((await post(chatUrl, chat())).status).toBe(200);
  });

  it('leaves /health and /metrics alone', async () => {
    sim.setFault({ mode: 'error500' });
    expect((await get(`${sim.url}/health`)).status).toBe(200);
    expect((await get(`${sim.url}/metrics`)).status).toBe(200);
  });

  it('is driven over /admin/fault, and /admin/log and /admin/counters report what arrived', async () => {
    const set = await post(`${sim.url}/admin/fault`, { mode: 'error429', count: 1 });
    expect(set.json()).toEqual({ fault: { mode: 'error429', count: 1, remaining: 1 } });
    expect((await post(`${sim.url}/admin/fault`, { mode: 'explode' })).status).toBe(400);
    await fetch(`${sim.url}/admin/log`, { method: 'DELETE' });
    expect(
      (await post(chatUrl, chat({ seed: 5 }), { traceparent: '00-11111111111111111111111111111111-2222222222222222-01' })).status,
    ).toBe(429);
    expect((await get(`${sim.url}/admin/fault`)).json()).toMatchObject({ fault: { mode: 'ok' } });
    const log = (await get(`${sim.url}/admin/log`)).json<{
      requests: {
        path: string;
        headers: Record<string, string>;
        body: unknown;
      }[];
    }>().requests;
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({
      path: '/v1/chat/completions',
      headers: { traceparent: '00-11111111111111111111111111111111-2222222222222222-01' },
      body: { seed: 5 },
    });
    expect((await get(`${sim.url}/admin/counters`)).json()).toMatchObject({
      faultsInjected: expect.any(Number),
      requests: expect.any(Number),
    });
  });
});

describe('fault configured at start', () => {
  const fleet = new SimFleet();
  afterAll(() => fleet.closeAll());

  it('applies the start-up fault and keeps /admin off without admin', async () => {
    const sim = await fleet.start({ engine: 'vllm', role: 'decode', fault: { mode: 'error500', count: 1 } });
    expect((await post(`${sim.url}/v1/completions`, { prompt: 'x' })).status).toBe(500);
    expect((await post(`${sim.url}/v1/completions`, { prompt: 'x' })).status).toBe(200);
    expect((await post(`${sim.url}/admin/fault`, { mode: 'ok' })).status).toBe(404);
  });
});
