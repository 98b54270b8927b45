import { MODEL } from './bench';

/** One client request of the set, and the fault (if any) injected at one stage for it. */
export interface Case {
  readonly name: string;
  readonly path: '/v1/chat/completions' | '/v1/completions';
  readonly body: Record<string, unknown>;
  /** Inject this fault on each named stage's engine, for its first request only (all encoders: which one serves is the router's choice). */
  readonly fault?: { readonly stages: readonly string[]; readonly mode: 'error500' | 'error429' | 'error-in-stream' };
  /** The prefill leg must have run (the prompt is long enough that no router may skip it). */
  readonly needsPrefill: boolean;
}

/**
 * About 2 500 tokens of text, unique per case: long enough that per-request disaggregation always sends it to a
 * prefill (Triad prefills at most 512 uncached tokens on the decode pod), and no prefix cache holds it.
 */
export function longPrompt(tag: string): string {
  const sentence = `In case ${tag}, the router sends the prompt to a prefill engine, which computes its KV cache and hands it to a decode engine. `;
  return sentence.repeat(Math.ceil(10_000 / sentence.length));
}

const text = (t: string) => ({ type: 'text', text: t });
const image = (tag: string, n: number) => ({
  type: 'image_url',
  image_url: { url: `https://example.com/conformance/${tag}/image-${n}.png` },
});
const audio = (tag: string) => ({ type: 'audio_url', audio_url: { url: `https://example.com/conformance/${tag}/clip.wav` } });

function chat(content: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: MODEL, messages: [{ role: 'user', content }], max_tokens: 8, ...extra };
}

/**
 * The request set. `tag` keeps media URLs and prompts apart between runs of different benches; both routers of
 * one comparison get the same tag, so their bodies are identical.
 */
export function requestSet(
  tag: string,
  opts: { readonly prefillStage?: string; readonly decodeStage: string; readonly encodeStages?: readonly string[] },
): Case[] {
  const p = (name: string) => `${tag}/${name}`;
  const cases: Case[] = [
    { name: 'text, long', path: '/v1/chat/completions', body: chat(longPrompt(p('text'))), needsPrefill: true },
    {
      name: 'text, long, stream',
      path: '/v1/chat/completions',
      body: chat(longPrompt(p('stream')), { stream: true, stream_options: { include_usage: true } }),
      needsPrefill: true,
    },
    {
      name: 'completions, long',
      path: '/v1/completions',
      body: { model: MODEL, prompt: longPrompt(p('completions')), max_tokens: 8 },
      needsPrefill: true,
    },
    {
      name: 'text, long, min_tokens + max_completion_tokens',
      path: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'user', content: longPrompt(p('min')) }], max_completion_tokens: 8, min_tokens: 2 },
      needsPrefill: true,
    },
    { name: 'text, short', path: '/v1/chat/completions', body: chat('What is disaggregated inference?'), needsPrefill: false },
    { name: 'n=2, long', path: '/v1/chat/completions', body: chat(longPrompt(p('n2')), { n: 2 }), needsPrefill: true },
    { name: '1 image, long', path: '/v1/chat/completions', body: chat([text(longPrompt(p('img1'))), image(tag, 1)]), needsPrefill: true },
    {
      name: '3 images, long',
      path: '/v1/chat/completions',
      body: chat([text(longPrompt(p('img3'))), image(tag, 2), image(tag, 3), image(tag, 4)]),
      needsPrefill: true,
    },
    { name: 'audio, long', path: '/v1/chat/completions', body: chat([text(longPrompt(p('audio'))), audio(tag)]), needsPrefill: true },
  ];
  const faulted: [string, readonly string[]][] = [
    ...(opts.encodeStages ? [['E', opts.encodeStages] as [string, readonly string[]]] : []),
    ...(opts.prefillStage ? [[opts.prefillStage, [opts.prefillStage]] as [string, readonly string[]]] : []),
    [opts.decodeStage, [opts.decodeStage]],
  ];
  faulted.forEach(([name, stages], i) => {
    const prompt = longPrompt(p(`err-${name}`));
    const content = opts.encodeStages ? [text(prompt), image(tag, 10 + i)] : prompt;
    cases.push({
      name: `500 at ${name}, long`,
      path: '/v1/chat/completions',
      body: chat(content),
      fault: { stages, mode: 'error500' },
      needsPrefill: true,
    });
  });
  // The decode fails the request after its stream opened (200, then the error as the first event; vLLM's
  // GenerationError, a failed KV load): the same failure as its 500, reported inside the stream.
  const inStream = longPrompt(p('err-stream'));
  cases.push({
    name: `500 at ${opts.decodeStage} in its stream, long`,
    path: '/v1/chat/completions',
    body: chat(opts.encodeStages ? [text(inStream), image(tag, 20)] : inStream, { stream: true, stream_options: { include_usage: true } }),
    fault: { stages: [opts.decodeStage], mode: 'error-in-stream' },
    needsPrefill: true,
  });
  return cases;
}
