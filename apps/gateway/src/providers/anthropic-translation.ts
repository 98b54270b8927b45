import type { SseEvent } from '@triad/connectors';
import { BadRequestError, type Usage } from '@triad/request';

// OpenAI Chat Completions ⇄ Anthropic Messages, for `/v1/chat/completions` requests routed to an Anthropic
// ExternalModelProvider. The shapes are those of the two public APIs (docs/protocols/providers.md).

type Json = Record<string, unknown>;

/** Anthropic requires `max_tokens`; OpenAI clients often leave it out. */
export const DEFAULT_ANTHROPIC_MAX_TOKENS = 4096;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((p): p is Json => isObject(p) && typeof p['text'] === 'string')
    .map((p) => p['text'] as string)
    .join('\n');
}

/** An OpenAI `image_url` part as an Anthropic image block (data URLs inline as base64, others by URL). */
function imageBlock(part: Json): Json {
  const image = part['image_url'];
  const url = typeof image === 'string' ? image : isObject(image) && typeof image['url'] === 'string' ? image['url'] : '';
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (data) return { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } };
  if (url === '') throw new BadRequestError('an image_url part has no url', 'messages');
  return { type: 'image', source: { type: 'url', url } };
}

function contentBlocks(content: unknown): Json[] | string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return [];
  const blocks: Json[] = [];
  for (const part of content) {
    if (!isObject(part)) continue;
    if (part['type'] === 'text' && typeof part['text'] === 'string') blocks.push({ type: 'text', text: part['text'] });
    else if (part['type'] === 'image_url') blocks.push(imageBlock(part));
    else throw new BadRequestError(`content part type '${String(part['type'])}' cannot be sent to an Anthropic provider`, 'messages');
  }
  return blocks;
}

function parseArguments(args: unknown): unknown {
  if (typeof args !== 'string' || args === '') return {};
  try {
    return JSON.parse(args);
  } catch {
    throw new BadRequestError('tool_calls[].function.arguments is not valid JSON', 'messages');
  }
}

function toolChoice(choice: unknown): Json | undefined {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto') return { type: 'auto' };
  if (choice === 'required') return { type: 'any' };
  if (choice === 'none') return { type: 'none' };
  if (isObject(choice) && isObject(choice['function']) && typeof choice['function']['name'] === 'string') {
    return { type: 'tool', name: choice['function']['name'] };
  }
  throw new BadRequestError('tool_choice is not one an Anthropic provider understands', 'tool_choice');
}

/**
 * An OpenAI chat request as an Anthropic Messages request: `system`/`developer` messages become `system`,
 * tool calls and results become `tool_use`/`tool_result` blocks, `max_completion_tokens`/`max_tokens` become
 * the required `max_tokens`, `stop` becomes `stop_sequences`. Fields Anthropic has no counterpart for that
 * change the answer (`n` > 1, `logprobs`) are refused with 400 rather than dropped.
 */
export function chatToAnthropic(body: Readonly<Json>, model: string): Json {
  const messages = body['messages'];
  if (!Array.isArray(messages)) throw new BadRequestError('messages must be an array', 'messages');
  if (typeof body['n'] === 'number' && body['n'] !== 1) throw new BadRequestError('an Anthropic provider answers one choice (n: 1)', 'n');
  if (body['logprobs'] === true) throw new BadRequestError('an Anthropic provider returns no logprobs', 'logprobs');
  const system: string[] = [];
  const out: Json[] = [];
  for (const m of messages) {
    if (!isObject(m)) throw new BadRequestError('every message must be an object', 'messages');
    const role = m['role'];
    if (role === 'system' || role === 'developer') system.push(textOf(m['content']));
    else if (role === 'user') out.push({ role: 'user', content: contentBlocks(m['content']) });
    else if (role === 'assistant') {
      const blocks: Json[] = [];
      const text = textOf(m['content']);
      if (text !== '') blocks.push({ type: 'text', text });
      for (const call of Array.isArray(m['tool_calls']) ? m['tool_calls'] : []) {
        if (!isObject(call) || !isObject(call['function'])) continue;
        blocks.push({
          type: 'tool_use',
          id: call['id'],
          name: call['function']['name'],
          input: parseArguments(call['function']['arguments']),
        });
      }
      out.push({ role: 'assistant', content: blocks.length === 1 && blocks[0]?.['type'] === 'text' ? text : blocks });
    } else if (role === 'tool') {
      out.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: m['tool_call_id'], content: textOf(m['content']) }] });
    } else {
      throw new BadRequestError(`message role '${String(role)}' cannot be sent to an Anthropic provider`, 'messages');
    }
  }
  const maxTokens = body['max_completion_tokens'] ?? body['max_tokens'];
  const request: Json = {
    model,
    messages: out,
    max_tokens: typeof maxTokens === 'number' ? maxTokens : DEFAULT_ANTHROPIC_MAX_TOKENS,
  };
  if (system.length > 0) request['system'] = system.join('\n\n');
  for (const key of ['temperature', 'top_p', 'top_k'] as const) if (typeof body[key] === 'number') request[key] = body[key];
  const stop = body['stop'];
  if (typeof stop === 'string') request['stop_sequences'] = [stop];
  else if (Array.isArray(stop)) request['stop_sequences'] = stop;
  if (body['stream'] === true) request['stream'] = true;
  if (Array.isArray(body['tools'])) {
    request['tools'] = body['tools'].filter(isObject).map((t) => {
      const fn = isObject(t['function']) ? t['function'] : {};
      return {
        name: fn['name'],
        ...(typeof fn['description'] === 'string' ? { description: fn['description'] } : {}),
        input_schema: isObject(fn['parameters']) ? fn['parameters'] : { type: 'object', properties: {} },
      };
    });
  }
  const choice = toolChoice(body['tool_choice']);
  if (choice !== undefined) request['tool_choice'] = choice;
  if (typeof body['user'] === 'string') request['metadata'] = { user_id: body['user'] };
  return request;
}

/** Anthropic `stop_reason` → OpenAI `finish_reason`. */
export function finishReason(stopReason: unknown): string | null {
  switch (stopReason) {
    case 'end_turn':
    case 'stop_sequence':
    case 'pause_turn':
      return 'stop';
    case 'max_tokens':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return stopReason === null || stopReason === undefined ? null : 'stop';
  }
}

/** Anthropic usage → prompt/completion tokens; cached input (created or read) counts as input, as Kthena counts it. */
export function anthropicUsage(usage: unknown): Usage | undefined {
  if (!isObject(usage)) return undefined;
  const n = (k: string) => (typeof usage[k] === 'number' ? usage[k] : 0);
  return {
    promptTokens: n('input_tokens') + n('cache_creation_input_tokens') + n('cache_read_input_tokens'),
    completionTokens: n('output_tokens'),
  };
}

function openAiUsage(u: Usage): Json {
  return { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens, total_tokens: u.promptTokens + u.completionTokens };
}

/** An Anthropic message answer as an OpenAI chat completion. */
export function anthropicToChat(message: Readonly<Json>, model: string, created: number): { body: Json; usage: Usage | undefined } {
  let text = '';
  const toolCalls: Json[] = [];
  for (const block of Array.isArray(message['content']) ? message['content'] : []) {
    if (!isObject(block)) continue;
    if (block['type'] === 'text' && typeof block['text'] === 'string') text += block['text'];
    else if (block['type'] === 'tool_use') {
      toolCalls.push({
        id: block['id'],
        type: 'function',
        function: { name: block['name'], arguments: JSON.stringify(block['input'] ?? {}) },
      });
    }
  }
  const usage = anthropicUsage(message['usage']);
  const body: Json = {
    id: typeof message['id'] === 'string' ? message['id'] : 'chatcmpl-anthropic',
    object: 'chat.completion',
    created,
    model: typeof message['model'] === 'string' ? message['model'] : model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text === '' && toolCalls.length > 0 ? null : text,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: finishReason(message['stop_reason']),
        logprobs: null,
      },
    ],
  };
  if (usage !== undefined) body['usage'] = openAiUsage(usage);
  return { body, usage };
}

/** Anthropic's error types → the OpenAI error type a client of the chat API expects. */
function openAiErrorType(type: unknown, status: number): string {
  if (type === 'authentication_error' || type === 'permission_error' || type === 'not_found_error' || type === 'rate_limit_error')
    return type;
  if (type === 'overloaded_error' || status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** An Anthropic error body (`{type:"error", error:{type, message}}`) in the OpenAI shape; other bodies as their text. */
export function anthropicErrorToOpenAi(body: string, status: number): string {
  let type: unknown;
  let message = body.trim() === '' ? `provider answered HTTP ${status}` : body.trim();
  try {
    const parsed: unknown = JSON.parse(body);
    if (isObject(parsed) && isObject(parsed['error'])) {
      type = parsed['error']['type'];
      if (typeof parsed['error']['message'] === 'string') message = parsed['error']['message'];
    }
  } catch {
    // not JSON: the text is the message
  }
  return JSON.stringify({
    error: { message, type: openAiErrorType(type, status), param: null, code: typeof type === 'string' ? type : null },
  });
}

/**
 * Turns an Anthropic Messages event stream into OpenAI chat.completion.chunk events, one event at a time:
 * `message_start` → the role chunk, `text_delta` → `delta.content`, `tool_use` blocks and `input_json_delta`
 * → `delta.tool_calls`, `message_delta` → `finish_reason`, `message_stop` → the usage chunk (only when the
 * client asked for it with `stream_options.include_usage`) and `[DONE]`, `error` → an OpenAI error event.
 */
export class AnthropicStreamTranslator {
  usage: Usage | undefined;
  /** `message_stop` arrived: the answer is complete. */
  completed = false;
  readonly #model: string;
  readonly #created: number;
  readonly #includeUsage: boolean;
  #id = 'chatcmpl-anthropic';
  #upstreamModel: string | undefined;
  /** Anthropic content block index → OpenAI tool call index. */
  readonly #tools = new Map<number, number>();
  #input = 0;
  #output = 0;

  constructor(model: string, created: number, includeUsage: boolean) {
    this.#model = model;
    this.#created = created;
    this.#includeUsage = includeUsage;
  }

  /** OpenAI SSE text for one Anthropic event ('' when it has no counterpart, such as `ping`). */
  translate(event: SseEvent): string {
    let data: Json;
    try {
      const parsed: unknown = JSON.parse(event.data);
      if (!isObject(parsed)) return '';
      data = parsed;
    } catch {
      return '';
    }
    const type = typeof data['type'] === 'string' ? data['type'] : event.event;
    switch (type) {
      case 'message_start': {
        const message = isObject(data['message']) ? data['message'] : {};
        if (typeof message['id'] === 'string') this.#id = message['id'];
        if (typeof message['model'] === 'string') this.#upstreamModel = message['model'];
        this.#count(message['usage']);
        return this.#chunk({ role: 'assistant', content: '' }, null);
      }
      case 'content_block_start': {
        const block = isObject(data['content_block']) ? data['content_block'] : {};
        if (block['type'] !== 'tool_use') return '';
        const index = this.#tools.size;
        this.#tools.set(Number(data['index']), index);
        return this.#chunk(
          { tool_calls: [{ index, id: block['id'], type: 'function', function: { name: block['name'], arguments: '' } }] },
          null,
        );
      }
      case 'content_block_delta': {
        const delta = isObject(data['delta']) ? data['delta'] : {};
        if (delta['type'] === 'text_delta' && typeof delta['text'] === 'string') return this.#chunk({ content: delta['text'] }, null);
        if (delta['type'] === 'input_json_delta' && typeof delta['partial_json'] === 'string') {
          const index = this.#tools.get(Number(data['index'])) ?? 0;
          return this.#chunk({ tool_calls: [{ index, function: { arguments: delta['partial_json'] } }] }, null);
        }
        return '';
      }
      case 'message_delta': {
        this.#count(data['usage']);
        const delta = isObject(data['delta']) ? data['delta'] : {};
        return this.#chunk({}, finishReason(delta['stop_reason']));
      }
      case 'message_stop': {
        this.completed = true;
        const usage = this.usage;
        const tail =
          this.#includeUsage && usage !== undefined
            ? `data: ${JSON.stringify({ ...this.#head(), choices: [], usage: openAiUsage(usage) })}\n\n`
            : '';
        return `${tail}data: [DONE]\n\n`;
      }
      case 'error': {
        const error = isObject(data['error']) ? data['error'] : {};
        return `data: ${anthropicErrorToOpenAi(JSON.stringify({ error }), 500)}\n\ndata: [DONE]\n\n`;
      }
      default:
        return '';
    }
  }

  #count(usage: unknown): void {
    const u = anthropicUsage(usage);
    if (u === undefined) return;
    // message_start carries the input (and a first output count), message_delta the running output total.
    if (u.promptTokens > 0) this.#input = u.promptTokens;
    if (u.completionTokens > 0) this.#output = u.completionTokens;
    this.usage = { promptTokens: this.#input, completionTokens: this.#output };
  }

  #head(): Json {
    return { id: this.#id, object: 'chat.completion.chunk', created: this.#created, model: this.#upstreamModel ?? this.#model };
  }

  #chunk(delta: Json, finish: string | null): string {
    return `data: ${JSON.stringify({ ...this.#head(), choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  }
}
