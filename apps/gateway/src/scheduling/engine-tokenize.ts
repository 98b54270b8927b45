import type { InferenceEngine } from '@triad/crd';
import type { PromptTokens, VllmMmItem } from '@triad/kv-events';

/** Which tokenize API of the engine to call. */
export type EngineTokenizeApi = 'vllm-tokenize' | 'vllm-render' | 'sglang-tokenize';

export function tokenizeApiOf(engine: InferenceEngine, vllmEndpoint: 'tokenize' | 'render' | undefined): EngineTokenizeApi {
  if (engine === 'SGLang') return 'sglang-tokenize';
  return vllmEndpoint === 'render' ? 'vllm-render' : 'vllm-tokenize';
}

/** Why an engine tokenize call gave no ids (the request falls back to the local tokenizer, or gets no keys). */
export class EngineTokenizeError extends Error {
  constructor(
    readonly reason: 'timeout' | 'http' | 'network' | 'invalid_answer' | 'unsupported',
    message: string,
  ) {
    super(message);
  }
}

/** Chat fields the engines' tokenize endpoints take (vLLM TokenizeChatRequest; SGLang's is a subset). */
const CHAT_FIELDS = ['messages', 'tools', 'add_generation_prompt', 'continue_final_message', 'chat_template_kwargs', 'mm_processor_kwargs'];

/** The request to send: path and JSON body. */
export function tokenizeRequest(api: EngineTokenizeApi, model: string, body: Record<string, unknown>): { path: string; json: unknown } {
  const chat = Array.isArray(body['messages']);
  if (api === 'vllm-render') {
    // The render endpoints take the inference request itself and return what the engine would run.
    const { stream: _s, stream_options: _o, ...rest } = body;
    return { path: chat ? '/v1/chat/completions/render' : '/v1/completions/render', json: { ...rest, model } };
  }
  const out: Record<string, unknown> = { model };
  if (chat) {
    if (api === 'vllm-tokenize' && body['documents'] !== undefined) {
      throw new EngineTokenizeError('unsupported', 'vLLM /tokenize takes no documents');
    }
    for (const f of CHAT_FIELDS) if (body[f] !== undefined && body[f] !== null) out[f] = body[f];
    out['add_special_tokens'] = body['add_special_tokens'] ?? false;
  } else {
    const prompt = body['prompt'];
    if (typeof prompt !== 'string') throw new EngineTokenizeError('unsupported', 'only text prompts are tokenized by the engine');
    out['prompt'] = prompt;
    out['add_special_tokens'] = body['add_special_tokens'] ?? true;
  }
  return { path: '/tokenize', json: out };
}

const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.every((t) => Number.isInteger(t));

/**
 * The token ids (and multimodal items) in an engine's answer: `tokens` from /tokenize (vLLM and SGLang);
 * from vLLM's render endpoints a GenerateRequest: `token_ids` and `features` (`mm_hashes` and `mm_placeholders` per
 * modality; items sorted by offset, the order vLLM keeps its `mm_features`).
 */
export function parseTokenizeAnswer(api: EngineTokenizeApi, answer: unknown): PromptTokens {
  const a = (Array.isArray(answer) ? answer[0] : answer) as Record<string, unknown> | undefined;
  if (typeof a !== 'object' || a === null) throw new EngineTokenizeError('invalid_answer', 'answer is not an object');
  if (api !== 'vllm-render') {
    if (!isIds(a['tokens'])) throw new EngineTokenizeError('invalid_answer', 'answer has no tokens');
    return { ids: a['tokens'], mm: [] };
  }
  if (!isIds(a['token_ids'])) throw new EngineTokenizeError('invalid_answer', 'answer has no token_ids');
  const features = a['features'] as { mm_hashes?: Record<string, unknown>; mm_placeholders?: Record<string, unknown> } | null | undefined;
  const mm: VllmMmItem[] = [];
  for (const [modality, hashes] of Object.entries(features?.mm_hashes ?? {})) {
    const places = features?.mm_placeholders?.[modality];
    if (!Array.isArray(hashes) || !Array.isArray(places) || hashes.length !== places.length) {
      throw new EngineTokenizeError('invalid_answer', `features for ${modality} do not pair hashes with placeholders`);
    }
    hashes.forEach((h, i) => {
      const p = places[i] as { offset?: unknown; length?: unknown };
      if (typeof h !== 'string' || !Number.isInteger(p?.offset) || !Number.isInteger(p?.length)) {
        throw new EngineTokenizeError('invalid_answer', `feature ${modality}[${i}] is malformed`);
      }
      mm.push({ identifier: h, offset: p.offset as number, length: p.length as number });
    });
  }
  mm.sort((x, y) => x.offset - y.offset);
  return { ids: a['token_ids'], mm };
}

export interface EngineTokenizeCall {
  readonly base: string;
  readonly api: EngineTokenizeApi;
  readonly model: string;
  readonly body: Record<string, unknown>;
  readonly timeoutMs: number;
  readonly headers?: Readonly<Record<string, string>>;
}

/** One tokenize call to an engine, bounded by `timeoutMs`. */
export async function engineTokenize(call: EngineTokenizeCall): Promise<PromptTokens> {
  const { path, json } = tokenizeRequest(call.api, call.model, call.body);
  let res: Response;
  try {
    res = await fetch(call.base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...call.headers },
      body: JSON.stringify(json),
      signal: AbortSignal.timeout(call.timeoutMs),
    });
  } catch (err) {
    const e = err as Error;
    if (e.name === 'TimeoutError' || e.name === 'AbortError')
      throw new EngineTokenizeError('timeout', `no answer within ${call.timeoutMs} ms`);
    throw new EngineTokenizeError('network', e.message);
  }
  const text = await res.text();
  if (!res.ok) throw new EngineTokenizeError('http', `HTTP ${res.status} from ${path}: ${text.slice(0, 200)}`);
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new EngineTokenizeError('invalid_answer', 'answer is not JSON');
  }
  return parseTokenizeAnswer(call.api, answer);
}
