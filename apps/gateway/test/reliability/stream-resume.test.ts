import OpenAI from 'openai';
import type { SimEngineHandle } from '@triad/engine-sim';
import { DEATH_POINTS, deployServer, runMidStreamScenario, type TopologyName } from '@triad/testing/reliability';
import { accessLines, inferenceRequests, type Harness } from '../support/harness';
import { matrixStack, unexpectedErrors, useMatrixGateway } from './support/matrix-stack';

// A stream whose final pod (aggregated or decode) dies mid-answer is continued on the other pod when the ModelServer
// sets trafficPolicy.streamResume: the text already sent becomes the start of the answer, the continuation is spliced
// into the same stream, and the client's text equals the uninterrupted answer token for token (the engine-sims
// continue their own answers as the engines do under greedy sampling).

const TOPOLOGIES: TopologyName[] = ['vllm-aggregated', 'vllm-pd', 'vllm-epd', 'sglang-aggregated', 'sglang-pd'];

interface Collected {
  text: string;
  ids: Set<string>;
  usage: OpenAI.CompletionUsage | undefined;
  finish: string | null;
}

async function collect(stream: AsyncIterable<OpenAI.ChatCompletionChunk>): Promise<Collected> {
  const out: Collected = { text: '', ids: new Set(), usage: undefined, finish: null };
  for await (const chunk of stream) {
    out.ids.add(chunk.id);
    out.text += chunk.choices[0]?.delta.content ?? '';
    out.finish = chunk.choices[0]?.finish_reason ?? out.finish;
    if (chunk.usage) out.usage = chunk.usage;
  }
  return out;
}

async function resumeOutcomes(h: Harness): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^triad_gateway_stream_resumes_total\{.*outcome="(\w+)".*\} (\d+)/.exec(line);
    if (m) out[m[1]] = (out[m[1]] ?? 0) + Number(m[2]);
  }
  return out;
}

describe('stream resume: a final pod dying mid-stream', () => {
  const matrix = useMatrixGateway(TOPOLOGIES, 60);

  it.each(TOPOLOGIES)(
    '%s: deaths at the first token, the middle and the last token are resumed, the text exact, usage and id kept',
    async (name) => {
      const topo = matrix.topology(name);
      for (const point of DEATH_POINTS) {
        const r = await runMidStreamScenario(
          matrixStack(matrix.h),
          topo,
          { topology: name, point, resume: true },
          { requests: 3, tag: 't' },
        );
        expect({ point, failed: r.failed, failures: r.failures }).toEqual({ point, failed: 0, failures: {} });
        expect({ point, exact: r.exact, duplicated: r.duplicatedText, lost: r.lostText, wrong: r.wrongIdOrUsage }).toEqual({
          point,
          exact: 3,
          duplicated: 0,
          lost: 0,
          wrong: 0,
        });
        // Every stream that met the dying pod was resumed (and at least one did: the scheduler prefers pod 0 by load).
        expect(r.metDeath).toBeGreaterThan(0);
        expect(r.resumed).toBe(r.metDeath);
        // PD and EPD: the continuation needs its prompt (with the text sent) prefilled again: two prefill legs.
        if (name !== 'vllm-aggregated' && name !== 'sglang-aggregated')
          expect(r.prefillLegsPerRequest).toEqual(new Array<number>(r.metDeath).fill(2));
      }
      expect(await unexpectedErrors(matrix.h)).toBe(0);
      expect(matrix.rejections).toEqual([]);
    },
    120_000,
  );

  it('without streamResume the same death fails the stream as before (an SSE error event)', async () => {
    const topo = matrix.topology('vllm-aggregated');
    const r = await runMidStreamScenario(
      matrixStack(matrix.h),
      topo,
      { topology: 'vllm-aggregated', point: 'middle', resume: false },
      { requests: 2, tag: 'off' },
    );
    expect(r.metDeath).toBe(2);
    expect(r.failures).toEqual({ 'sse-error': 2 });
    expect(r.resumed).toBe(0);
  });

  it('SGLang: a stream dying after its last token, before its separate finish chunk, is ended by the gateway at max_tokens', async () => {
    const topo = matrix.topology('sglang-aggregated');
    const [dying, healthy] = topo.sims.aggregated as unknown as [SimEngineHandle, SimEngineHandle];
    const model = await deployServer(matrixStack(matrix.h), topo, 'sdk-resume-sglang', {
      outlierDetection: { consecutiveErrors: 0 },
      streamResume: {},
    });
    const client = new OpenAI({ baseURL: `${matrix.h.gateway.url}/v1`, apiKey: 'test', maxRetries: 0 });
    const chat = () =>
      client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'Why do streams break? '.repeat(40) }],
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 16,
      });
    const reference = await collect(await chat());
    healthy.clearRequests();
    dying.setFault({ mode: 'die-mid-stream', afterTokens: 1000 });
    try {
      const got = await collect(await chat());
      expect(got.text).toBe(reference.text);
      expect(got.finish).toBe('length');
      expect(got.usage?.completion_tokens).toBe(16);
      expect(got.usage?.prompt_tokens).toBe(reference.usage?.prompt_tokens);
      expect(inferenceRequests(healthy)).toHaveLength(0);
    } finally {
      dying.setFault({ mode: 'ok' });
    }
  });

  describe('through the openai SDK (vLLM aggregated)', () => {
    let client: OpenAI;
    let dying: SimEngineHandle;
    let healthy: SimEngineHandle;
    let model: string;
    const prompt = 'Explain how a router resumes a broken stream. '.repeat(40);

    beforeAll(async () => {
      const topo = matrix.topology('vllm-aggregated');
      [dying, healthy] = topo.sims.aggregated as unknown as [SimEngineHandle, SimEngineHandle];
      model = await deployServer(matrixStack(matrix.h), topo, 'sdk-resume', {
        outlierDetection: { consecutiveErrors: 0 },
        streamResume: { maxTokens: 100 },
      });
      client = new OpenAI({ baseURL: `${matrix.h.gateway.url}/v1`, apiKey: 'test', maxRetries: 0 });
    });
    afterEach(() => {
      dying.setFault({ mode: 'ok' });
    });

    const chat = (extra: Partial<OpenAI.ChatCompletionCreateParamsStreaming> = {}) =>
      client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: prompt }],
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 30,
        seed: 42,
        temperature: 0,
        ...extra,
      });

    it.each([0, 5, 29])('a chat stream dying after %i tokens reads as the uninterrupted answer', async (k) => {
      const reference = await collect(await chat());
      expect(reference.usage?.completion_tokens).toBe(30);
      healthy.clearRequests();
      dying.setFault({ mode: 'die-mid-stream', afterTokens: k });
      const got = await collect(await chat());
      expect(got.text).toBe(reference.text);
      expect(got.ids.size).toBe(1);
      expect(got.finish).toBe('length');
      expect(got.usage).toEqual(reference.usage);
      // The continuation the other pod got: the text sent as the final assistant message, the limit cut by the
      // tokens sent, the client's sampling fields unchanged.
      const continued = inferenceRequests(healthy).map((r) => r.body as Record<string, unknown>);
      expect(continued).toHaveLength(1);
      const body = continued[0];
      expect(body['max_tokens']).toBe(30 - k);
      expect(body['seed']).toBe(42);
      expect(body['temperature']).toBe(0);
      const messages = body['messages'] as { role: string; content: string }[];
      if (k === 0) {
        expect(messages).toHaveLength(1);
      } else {
        expect(messages[messages.length - 1]).toEqual({ role: 'assistant', content: textOfTokens(reference.text, k) });
        expect(body['continue_final_message']).toBe(true);
        expect(body['add_generation_prompt']).toBe(false);
      }
    });

    it('a completions stream continues with the text appended to the prompt', async () => {
      const run = async () => {
        const stream = await client.completions.create({
          model,
          prompt,
          stream: true,
          max_tokens: 20,
          stream_options: { include_usage: true },
        });
        let text = '';
        let usage: OpenAI.CompletionUsage | undefined;
        const ids = new Set<string>();
        for await (const c of stream) {
          ids.add(c.id);
          text += c.choices[0]?.text ?? '';
          if (c.usage) usage = c.usage;
        }
        return { text, usage, ids };
      };
      const reference = await run();
      healthy.clearRequests();
      dying.setFault({ mode: 'die-mid-stream', afterTokens: 8 });
      const got = await run();
      expect(got).toEqual({ ...reference, ids: got.ids });
      expect(got.ids.size).toBe(1);
      const body = inferenceRequests(healthy)[0]?.body as Record<string, unknown>;
      expect(body['prompt']).toBe(prompt + textOfTokens(reference.text, 8));
      expect(body['max_tokens']).toBe(12);
    });

    it('a stream dying after its final chunk is ended by the gateway, with no continuation sent', async () => {
      const reference = await collect(await chat());
      healthy.clearRequests();
      const before = await resumeOutcomes(matrix.h);
      dying.setFault({ mode: 'die-mid-stream', afterTokens: 1000 });
      const got = await collect(await chat());
      expect(got.text).toBe(reference.text);
      expect(got.usage).toEqual(reference.usage);
      expect(inferenceRequests(healthy)).toHaveLength(0);
      expect((await resumeOutcomes(matrix.h))['completed']).toBe((before['completed'] ?? 0) + 1);
    });

    it('logprobs are not resumed: the stream fails as before, counted as refused', async () => {
      const before = await resumeOutcomes(matrix.h);
      dying.setFault({ mode: 'die-mid-stream', afterTokens: 4 });
      await expect(collect(await chat({ logprobs: true }))).rejects.toThrow();
      expect((await resumeOutcomes(matrix.h))['refused']).toBe((before['refused'] ?? 0) + 1);
      const line = accessLines(matrix.h).find((l) => l['stream_resume_refused'] === 'not_eligible');
      expect(line).toBeDefined();
    });

    it('a non-streamed request whose pod dies mid-answer is retried whole, as before', async () => {
      dying.setFault({ mode: 'die-mid-stream', afterTokens: 3 });
      const res = await client.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }], max_tokens: 10 });
      expect(res.choices[0]?.message.content?.length).toBeGreaterThan(0);
      expect(res.usage?.completion_tokens).toBe(10);
    });
  });
});

/** The first `k` tokens of a simulator answer (its tokens are words with a leading space). */
function textOfTokens(text: string, k: number): string {
  const words = text.split(' ').slice(1, k + 1);
  return words.map((w) => ` ${w}`).join('');
}
