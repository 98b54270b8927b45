import { ScrapeError } from './engine-http';

/**
 * Model ids of a `GET /v1/models` answer (OpenAI's model list as vLLM and SGLang serve it: the base model first,
 * then LoRA adapters), in the engine's order, without duplicates. Checked by hand rather than with a schema: it is
 * read for every engine every few seconds, and only `data[].id` matters.
 */
export function parseModelIds(text: string): string[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ScrapeError('parse', '/v1/models answer is not JSON');
  }
  const data = typeof raw === 'object' && raw !== null ? (raw as { data?: unknown }).data : undefined;
  if (!Array.isArray(data)) throw new ScrapeError('parse', '/v1/models answer has no data[].id list: no data array');
  const ids: string[] = [];
  for (let i = 0; i < data.length; i++) {
    const entry: unknown = data[i];
    const id = typeof entry === 'object' && entry !== null ? (entry as { id?: unknown }).id : undefined;
    if (typeof id !== 'string' || id.length === 0)
      throw new ScrapeError('parse', `/v1/models answer has no data[].id list: data[${i}].id is not a non-empty string`);
    if (!ids.includes(id)) ids.push(id);
  }
  return ids;
}
