import type { SseEvent } from '@triad/connectors';
import type { Usage } from '@triad/request';
import { anthropicUsage } from './anthropic-translation';

/** The wire protocol of a provider request: it decides where usage is and what the gateway may remove. */
export type ProviderProtocol = 'openai-chat' | 'openai-responses' | 'anthropic-messages';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

function parse(text: string): Json | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

function openAiUsage(u: unknown): Usage | undefined {
  if (!isObject(u)) return undefined;
  // Chat/Completions count prompt/completion tokens, the Responses API input/output tokens.
  const input = u['prompt_tokens'] ?? u['input_tokens'];
  const output = u['completion_tokens'] ?? u['output_tokens'];
  if (typeof input !== 'number' && typeof output !== 'number') return undefined;
  return { promptTokens: typeof input === 'number' ? input : 0, completionTokens: typeof output === 'number' ? output : 0 };
}

/** Usage of a complete (non-stream) provider answer. */
export function bodyUsage(protocol: ProviderProtocol, body: string): Usage | undefined {
  const json = parse(body);
  if (json === undefined) return undefined;
  return protocol === 'anthropic-messages' ? anthropicUsage(json['usage']) : openAiUsage(json['usage']);
}

/**
 * Reads usage from a relayed event stream: OpenAI chat/completions usage chunks (removing the usage-only chunk
 * when the gateway asked for it and the client did not), the Responses API's `response.completed`, Anthropic's
 * `message_start` (input) and `message_delta` (running output total).
 */
export class StreamUsage {
  usage: Usage | undefined;
  readonly #protocol: ProviderProtocol;
  readonly #dropInjected: boolean;

  constructor(protocol: ProviderProtocol, dropInjected: boolean) {
    this.#protocol = protocol;
    this.#dropInjected = dropInjected;
  }

  /** Reads the event; true when it must not reach the client. */
  observe(event: SseEvent): boolean {
    if (event.data === '' || event.data === '[DONE]' || !event.data.includes('usage')) return false;
    const json = parse(event.data);
    if (json === undefined) return false;
    if (this.#protocol === 'openai-chat') {
      const usage = openAiUsage(json['usage']);
      if (usage === undefined) return false;
      this.usage = usage;
      return this.#dropInjected && Array.isArray(json['choices']) && json['choices'].length === 0;
    }
    if (this.#protocol === 'openai-responses') {
      const response = json['response'];
      const usage = isObject(response) ? openAiUsage(response['usage']) : undefined;
      if (usage !== undefined) this.usage = usage;
      return false;
    }
    const message = json['message'];
    const usage = anthropicUsage(isObject(message) ? message['usage'] : json['usage']);
    if (usage !== undefined) {
      this.usage = {
        promptTokens: usage.promptTokens > 0 ? usage.promptTokens : (this.usage?.promptTokens ?? 0),
        completionTokens: usage.completionTokens > 0 ? usage.completionTokens : (this.usage?.completionTokens ?? 0),
      };
    }
    return false;
  }
}
