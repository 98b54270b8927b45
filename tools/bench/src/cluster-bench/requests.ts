import type { Segment, SimRequest } from '../cluster-sim/workload';

const WORDS = ['alpha', 'bravo', 'delta', 'ember', 'fable', 'gamma', 'harbor', 'ivory', 'jungle', 'kernel', 'lumen', 'meadow'];

/**
 * Text of exactly `tokens` simulated tokens (the engine-sim counts four characters per token) that belongs to
 * segment `id` alone: two prompts share text, and so prefix-cache blocks, exactly where they share segments.
 */
export function segmentText(id: number, tokens: number): string {
  const head = `[s${id}] `;
  let text = head;
  for (let i = 0; text.length < tokens * 4; i++) text += `${WORDS[(id + i * 7) % WORDS.length]} `;
  return text.slice(0, tokens * 4);
}

/** A data URL standing for image `n` (the router and the engines key images by their content). */
export function imageUrl(n: number): string {
  return `data:image/png;base64,${Buffer.from(`bench-image-${n}`).toString('base64')}`;
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
      s.image !== undefined ? { type: 'image_url', image_url: { url: imageUrl(s.image) } } : { type: 'text', text: segmentText(s.id, s.tokens) };
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
