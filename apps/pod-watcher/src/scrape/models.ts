import { z } from 'zod';
import { ScrapeError } from './engine-http';

// OpenAI's model list as vLLM and SGLang serve it; only the ids matter (base model first, then LoRA adapters).
const ModelListSchema = z.object({ data: z.array(z.object({ id: z.string().min(1) })) });

/** Model ids of a `GET /v1/models` answer, in the engine's order, without duplicates. */
export function parseModelIds(text: string): string[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ScrapeError('parse', '/v1/models answer is not JSON');
  }
  const parsed = ModelListSchema.safeParse(raw);
  if (!parsed.success) throw new ScrapeError('parse', `/v1/models answer has no data[].id list: ${parsed.error.issues[0]?.message ?? ''}`);
  return [...new Set(parsed.data.data.map((m) => m.id))];
}
