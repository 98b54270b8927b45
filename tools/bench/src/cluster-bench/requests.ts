import { pngDataUrl } from '@triad/testing';
import type { Segment, SimRequest } from '../cluster-sim/workload';

/**
 * Three-letter words that are one token each in the benchmark's tokenizer (bert-base-uncased, kv-routing.ts): a word
 * and its space are four characters, one simulated token (the engine-sim counts four characters per token), so the
 * simulator's token count and the tokenizer's agree and the engines' KV-event block keys cover the whole prompt.
 */
const WORDS = (
  'the and for are but not you all any can had her was one our out day get has him his how man new now old see two ' +
  'way who boy did its let put say she too use act add age ago aid aim air arm art ask bad bag bar bed big bit box ' +
  'bus buy car cat cup cut dog dry due ear eat egg end eye fan far fat few fit fix fly fun gap gas god gun guy hat ' +
  'hit hot ice ill job key kid lab law lay leg lie lot low map mix mom net nor oil pay pen pet pop pot raw red rid ' +
  'row run sad sea set sit six sky son sun tax tea ten tie tip top toy try war web wet win yes yet'
).split(' ');

function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

/**
 * Text of exactly `tokens` simulated tokens that belongs to segment `id` alone: its first four words spell the id
 * (base 136), the rest are drawn from a hash of the id, so two prompts share text, and so prefix-cache blocks,
 * exactly where they share segments.
 */
export function segmentText(id: number, tokens: number): string {
  const n = WORDS.length;
  const words: string[] = [];
  for (let i = 0; i < tokens; i++) {
    const digit = i < 4 ? Math.floor(id / n ** i) % n : mix32(Math.imul(id + 1, 0x9e3779b1) ^ i) % n;
    words.push(WORDS[digit]);
  }
  return words.map((w) => `${w} `).join('');
}

const images = new Map<number, string>();

/**
 * Image `n` as a client sends it inline: a 448×448 PNG of its own colour, without a `uuid` (the engines hash its
 * content; a Qwen2-VL processor makes it 256 placeholder tokens, the engine-sim's image size).
 */
export function imageUrl(n: number): string {
  let url = images.get(n);
  if (url === undefined) images.set(n, (url = pngDataUrl(448, 448, n)));
  return url;
}

type Part = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };
interface Message {
  role: string;
  content: Part[];
}

/**
 * The OpenAI chat body of a workload request: a segment with a role opens a message, the following ones without
 * a role continue it (images as `image_url` parts); streamed, so the client sees its first token.
 */
export function chatBody(model: string, r: SimRequest): Record<string, unknown> {
  const messages: Message[] = [];
  const push = (s: Segment) => {
    const part: Part =
      s.image !== undefined
        ? { type: 'image_url', image_url: { url: imageUrl(s.image) } }
        : { type: 'text', text: segmentText(s.id, s.tokens) };
    const last = messages[messages.length - 1];
    if (s.role || !last) messages.push({ role: s.role ?? 'user', content: [part] });
    else last.content.push(part);
  };
  r.segments.forEach(push);
  return {
    model,
    messages,
    max_tokens: r.outputTokens,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
    ...(r.session ? { user: r.session } : {}),
  };
}
