import type { Decision } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { proxyRequest, serverProfile } from '@triad/request/testing';
import { FakeLegRunner, engineError } from '../testing';
import { SglangPdConnector } from './sglang-pd-connector';

const prefill = { key: 'default.pd.p-0', pod: 'p-0', ip: '10.0.2.1', port: 30000, bootstrapPort: 8998 };
const decode = { key: 'default.pd.d-0', pod: 'd-0', ip: '10.0.2.2', port: 30000 };
const decision: Decision = { id: 'r', ok: true, mode: 'pd', attempts: [{ endpoint: decode, prefill }, { endpoint: decode }], encoders: [] };
const server = serverProfile({
  name: 'pd',
  engine: 'SGLang',
  mode: 'pd',
  connector: 'sglang-pd',
  timeouts: { encodeMs: 1, prefillMs: 2, firstByteMs: 3, totalMs: 4 },
});
const chat = (stream: boolean) => ({ model: 'm', stream, messages: [{ role: 'user', content: 'hi' }] });

describe('SglangPdConnector', () => {
  it('streams: prefill (drained) and decode (relayed) at once, with the same body and bootstrap room', async () => {
    const ctx = proxyRequest({ id: 'sg-1', body: chat(true), server, decision, injectUsage: true });
    const run = new FakeLegRunner((spec) =>
      spec.stage === 'decode'
        ? {
            contentType: 'text/event-stream',
            body: 'data: [DONE]\n\n',
          }
        : {},
    );
    await new SglangPdConnector('sglang-pd').attempt(ctx, decision.attempts[0], 0, run);
    expect(run.legs.map((l) => [l.spec.stage, l.mode, l.spec.requestId, l.spec.timeoutMs])).toEqual([
      ['prefill', 'drained', 'sg-1', 2],
      ['decode', 'relay', 'sg-1', 3],
    ]);
    expect(run.legs[0].spec.body).toBe(run.legs[1].spec.body);
    expect(run.legs[0].json()).toMatchObject({
      bootstrap_host: '10.0.2.1',
      bootstrap_port: 8998,
      bootstrap_room: expect.any(Number),
      stream_options: { include_usage: true },
    });
    expect(run.legs[0].json()).not.toHaveProperty('epd_bootstrap_addr');
    expect(run.answers).toEqual([{ via: 'relay', status: 200, body: 'data: [DONE]\n\n' }]);
  });

  it('answers a non-stream request only once the prefill succeeded too', async () => {
    let prefillDone = false;
    const run = new FakeLegRunner(async (spec) => {
      if (spec.stage === 'decode') return { body: '{"choices":[]}' };
      for (let i = 0; i < 5; i++) await Promise.resolve(); // the decode answers first
      prefillDone = true;
      return {};
    });
    const answered = new SglangPdConnector('sglang-pd').attempt(
      proxyRequest({ body: chat(false), server, decision }),
      decision.attempts[0],
      0,
      run,
    );
    await answered;
    expect(prefillDone).toBe(true);
    expect(run.legsOf('decode')[0].mode).toBe('buffered');
    expect(run.answers).toEqual([{ via: 'respond', status: 200, body: '{"choices":[]}' }]);
  });

  it("aborts the waiting decode when the prefill fails, and fails the attempt with the prefill's error", async () => {
    const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? engineError(spec, 503, 'no KV space') : 'hang'));
    const err = await new SglangPdConnector('sglang-pd')
      .attempt(proxyRequest({ body: chat(true), server, decision }), decision.attempts[0], 0, run)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ stage: 'prefill', status: 503, retryable: true });
    expect(run.legsOf('decode')[0].abortedWith).toBe(err);
    expect(run.answers).toEqual([]);
  });

  it('gives each try a fresh room; SGLang EPD sends exactly the PD fields (no encoder address)', async () => {
    const run = new FakeLegRunner();
    const epd = serverProfile({ ...server, mode: 'epd', connector: 'sglang-epd' });
    const ctx = proxyRequest({ body: chat(true), server: epd, decision });
    const connector = new SglangPdConnector('sglang-epd');
    await connector.attempt(ctx, decision.attempts[0], 0, run);
    await connector.attempt(ctx, decision.attempts[0], 1, run);
    const rooms = run.legsOf('prefill').map((l) => l.json()['bootstrap_room']);
    expect(rooms[0]).not.toBe(rooms[1]);
    expect(run.legs[0].json()).not.toHaveProperty('epd_bootstrap_addr');
  });

  it("asks the rank picker per leg and pins both legs' ranks (prefill rank also to the decode)", async () => {
    const run = new FakeLegRunner();
    const asked: string[] = [];
    const dpRank = (e: { pod: string }, role: string) => {
      asked.push(`${role}:${e.pod}`);
      return role === 'prefill' ? 1 : 0;
    };
    const ctx = proxyRequest({ body: chat(false), server, decision, dpRank });
    await new SglangPdConnector('sglang-pd').attempt(ctx, decision.attempts[0], 0, run);
    expect(asked).toEqual(['prefill:p-0', 'decode:d-0']);
    expect(run.legsOf('prefill')[0].json()).toMatchObject({ routed_dp_rank: 1 });
    expect(run.legsOf('decode')[0].json()).toMatchObject({ routed_dp_rank: 0, disagg_prefill_dp_rank: 1 });
  });

  it('SGLang E→PD (no prefill stage): one hop to the language-only server, without bootstrap fields', async () => {
    const run = new FakeLegRunner((spec) => ({ contentType: 'text/event-stream', body: `data: ${spec.stage}\n\n` }));
    const epd = serverProfile({ ...server, mode: 'epd', connector: 'sglang-epd' });
    const ctx = proxyRequest({ body: chat(true), server: epd, decision });
    await new SglangPdConnector('sglang-epd').attempt(ctx, decision.attempts[1], 1, run);
    expect(run.legs.map((l) => [l.spec.stage, l.mode])).toEqual([['decode', 'relay']]);
    expect(run.legs[0].json()).not.toHaveProperty('bootstrap_room');
  });

  it('refuses an attempt without a prefill endpoint', async () => {
    await expect(
      new SglangPdConnector('sglang-pd').attempt(
        proxyRequest({ body: chat(true), server, decision }),
        decision.attempts[1],
        1,
        new FakeLegRunner(),
      ),
    ).rejects.toMatchObject({
      code: ErrorCode.SchedNoPrefillPair,
    });
  });

  it('reports a transfer left half-way: the failed leg, and that the other was still running and got aborted', async () => {
    for (const failing of ['prefill', 'decode'] as const) {
      const run = new FakeLegRunner((spec) => (spec.stage === failing ? engineError(spec, 500) : 'hang'));
      await expect(
        new SglangPdConnector('sglang-pd').attempt(proxyRequest({ body: chat(true), server, decision }), decision.attempts[0], 0, run),
      ).rejects.toMatchObject({ stage: failing });
      expect(run.stranded).toEqual([{ engine: 'SGLang', prefill, decode, failed: failing, peerAborted: true }]);
      expect(run.legs.find((l) => l.spec.stage !== failing)?.abortedWith).toBeDefined();
    }
  });

  it('reports nothing when the decode fails after the prefill finished (the KV had been handed over)', async () => {
    const run = new FakeLegRunner(async (spec) => {
      if (spec.stage === 'prefill') return {};
      for (let i = 0; i < 5; i++) await Promise.resolve(); // the prefill finishes first
      return engineError(spec, 500);
    });
    await expect(
      new SglangPdConnector('sglang-pd').attempt(proxyRequest({ body: chat(false), server, decision }), decision.attempts[0], 0, run),
    ).rejects.toMatchObject({ stage: 'decode' });
    expect(run.stranded).toEqual([]);
  });

  describe('/generate beam search (sampling_params.beam_width > 1): one pair, n untouched', () => {
    // SGLang runs a beam search as one request per prompt (no parallel-sample expansion, so one bootstrap room
    // does), and n is how many of its beams it answers with, in meta_info.beam_results.
    const body = { text: 'a', sampling_params: { n: 2, beam_width: 3, max_new_tokens: 4 } };

    it('non-stream: one prefill/decode pair with the body as sent, the answer as the decode gave it', async () => {
      const beams = [
        { text: 'x', output_ids: [1], meta_info: { finish_reason: { type: 'length', length: 1 }, sequence_score: -0.1 } },
        { text: 'y', output_ids: [2], meta_info: { finish_reason: { type: 'length', length: 1 }, sequence_score: -0.2 } },
      ];
      const answer = JSON.stringify({
        text: 'x',
        output_ids: [1],
        meta_info: { prompt_tokens: 3, completion_tokens: 2, beam_results: beams },
      });
      const run = new FakeLegRunner((spec) => (spec.stage === 'prefill' ? {} : { body: answer }));
      await new SglangPdConnector('sglang-pd').attempt(
        proxyRequest({ id: 'sg-beam', path: '/generate', body, server, decision }),
        decision.attempts[0],
        0,
        run,
      );
      expect(run.legs.map((l) => [l.spec.stage, l.mode, l.spec.requestId])).toEqual([
        ['prefill', 'drained', 'sg-beam'],
        ['decode', 'buffered', 'sg-beam'],
      ]);
      expect(run.legs[0].spec.body).toBe(run.legs[1].spec.body);
      expect(run.legs[0].json()).toMatchObject({ sampling_params: body.sampling_params, bootstrap_room: expect.any(Number) });
      expect(run.answers).toEqual([{ via: 'respond', status: 200, body: answer }]);
    });

    it("fails with the engine's refusal from its one pair (SGLang PD servers refuse beam search)", async () => {
      const refusal = 'Beam search is not supported with PD disaggregation.';
      const run = new FakeLegRunner((spec) => engineError(spec, 400, refusal));
      const err = await new SglangPdConnector('sglang-pd')
        .attempt(proxyRequest({ path: '/generate', body: { ...body, stream: true }, server, decision }), decision.attempts[0], 0, run)
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ status: 400, message: expect.stringContaining(refusal) });
      expect(run.legs.map((l) => l.spec.stage)).toEqual(['prefill', 'decode']);
      expect(run.answers).toEqual([]);
    });
  });

  describe('n > 1: one prefill/decode pair per sample, merged', () => {
    const sampled = (stream: boolean) => ({ ...chat(stream), n: 3 });
    /** The decode answers with its room's last digits, so each sample's answer is told apart. */
    const engine = (stream: boolean) => (spec: { stage: string; body: string }) => {
      if (spec.stage === 'prefill') return {};
      const room = String((JSON.parse(spec.body) as { bootstrap_room: number }).bootstrap_room);
      if (!stream) {
        const usage = { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 };
        return { body: { id: `c-${room}`, choices: [{ index: 0, message: { content: room } }], usage } };
      }
      const chunk = { id: `c-${room}`, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: room } }] };
      const usage = { id: `c-${room}`, choices: [], usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 } };
      return {
        contentType: 'text/event-stream',
        body: `data: ${JSON.stringify(chunk)}\n\ndata: ${JSON.stringify(usage)}\n\ndata: [DONE]\n\n`,
      };
    };

    it('non-stream: n single-sample pairs on the one decision, each with its own room, answered as one', async () => {
      const run = new FakeLegRunner(engine(false));
      await new SglangPdConnector('sglang-pd').attempt(
        proxyRequest({ id: 'sg-n', body: sampled(false), server, decision }),
        decision.attempts[0],
        0,
        run,
      );
      const prefills = run.legsOf('prefill');
      const decodes = run.legsOf('decode');
      expect(prefills.map((l) => [l.mode, l.spec.endpoint.pod, l.json()['n']])).toEqual(new Array(3).fill(['drained', 'p-0', 1]));
      expect(decodes.map((l) => [l.mode, l.spec.endpoint.pod, l.spec.requestId])).toEqual([
        ['buffered', 'd-0', 'sg-n-s0'],
        ['buffered', 'd-0', 'sg-n-s1'],
        ['buffered', 'd-0', 'sg-n-s2'],
      ]);
      const rooms = prefills.map((l) => String(l.json()['bootstrap_room']));
      expect(new Set(rooms).size).toBe(3);
      expect(decodes.map((l) => String(l.json()['bootstrap_room']))).toEqual(rooms);
      expect(run.answers).toHaveLength(1);
      const answer = JSON.parse(run.answers[0].body) as { id: string; choices: { index: number }[]; usage: unknown };
      expect(answer.choices.map((c) => c.index)).toEqual([0, 1, 2]);
      expect(answer.usage).toEqual({ prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 });
    });

    it("/generate with per-prompt sampling params: n from the entries, each sample's entries asking for one", async () => {
      const body = {
        text: ['a', 'b'],
        sampling_params: [
          { n: 2, max_new_tokens: 4 },
          { n: 2, max_new_tokens: 5 },
        ],
      };
      const run = new FakeLegRunner((spec) => {
        if (spec.stage === 'prefill') return {};
        const meta = { prompt_tokens: 3, completion_tokens: 1 };
        return {
          body: JSON.stringify([
            { text: 'x', meta_info: meta },
            { text: 'y', meta_info: meta },
          ]),
        };
      });
      await new SglangPdConnector('sglang-pd').attempt(
        proxyRequest({ path: '/generate', body, server, decision }),
        decision.attempts[0],
        0,
        run,
      );
      const prefills = run.legsOf('prefill');
      expect(prefills.map((l) => l.json()['sampling_params'])).toEqual(
        new Array(2).fill([
          { n: 1, max_new_tokens: 4 },
          { n: 1, max_new_tokens: 5 },
        ]),
      );
      // Two prompts: a room each, in every sample's pair.
      const rooms = prefills.map((l) => l.json()['bootstrap_room'] as unknown[]);
      expect(rooms.map((r) => r.length)).toEqual([2, 2]);
      expect(new Set(rooms.flat().map(String)).size).toBe(4);
      expect(JSON.parse(run.answers[0].body)).toHaveLength(4);
    });

    it('streams: tapped decodes merged into one stream with one usage chunk when asked, and one [DONE]', async () => {
      const run = new FakeLegRunner(engine(true));
      const ctx = proxyRequest({ body: sampled(true), server, decision, injectUsage: true, clientWantsUsage: true });
      await new SglangPdConnector('sglang-pd').attempt(ctx, decision.attempts[0], 0, run);
      expect(run.legsOf('decode').map((l) => l.mode)).toEqual(['tapped', 'tapped', 'tapped']);
      expect(run.answers).toHaveLength(1);
      const events = run.answers[0].body.split('\n\n').filter((e) => e !== '');
      expect(events.at(-1)).toBe('data: [DONE]');
      const parsed = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as { choices: { index: number }[]; usage?: unknown });
      expect(
        parsed
          .slice(0, 3)
          .flatMap((e) => e.choices.map((c) => c.index))
          .sort(),
      ).toEqual([0, 1, 2]);
      expect(parsed[3]).toMatchObject({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 } });
      expect(run.streamUsage).toEqual({ promptTokens: 4, completionTokens: 6 });
    });

    it("fails as a whole with the first sample's error, aborting the other samples' legs", async () => {
      let decodes = 0;
      const run = new FakeLegRunner((spec) => {
        if (spec.stage === 'prefill') return 'hang';
        return ++decodes === 2 ? engineError(spec, 503, 'decode full') : 'hang';
      });
      const err = await new SglangPdConnector('sglang-pd')
        .attempt(proxyRequest({ body: sampled(false), server, decision }), decision.attempts[0], 0, run)
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ stage: 'decode', status: 503, retryable: true });
      expect(run.legs.filter((l) => l.abortedWith === undefined)).toHaveLength(1); // the failed decode itself
      expect(run.answers).toEqual([]);
    });

    it("fails a stream on a sample's error event, before anything went out", async () => {
      const run = new FakeLegRunner((spec) =>
        spec.stage === 'prefill' ? {} : { contentType: 'text/event-stream', body: 'data: {"error":{"message":"no room","code":400}}\n\n' },
      );
      const err = await new SglangPdConnector('sglang-pd')
        .attempt(proxyRequest({ body: sampled(true), server, decision }), decision.attempts[0], 0, run)
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ stage: 'decode', status: 400, retryable: false });
      expect((err as Error).message).toContain('no room');
      expect(run.answers).toEqual([]);
    });
  });
});
