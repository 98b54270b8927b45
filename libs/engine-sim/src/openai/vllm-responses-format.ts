import { tokenText, tokensText } from '../engine/tokens';
import type { ResponseFormat, ResponseView, StreamFramer } from './format';

/**
 * vLLM's Responses API answers for a plain (non-harmony) model, after `vllm/entrypoints/openai/responses/`
 * (`protocol.py` ResponsesResponse.from_request, `serving.py` responses_stream_generator,
 * `simple_streaming_events.py`): one assistant message item with one `output_text` part; `status` `incomplete`
 * with `incomplete_details.reason` `max_output_tokens` when the output was cut by the limit. A stream is named
 * events (`event: <type>\ndata: <json>\n\n`, no `[DONE]`), numbered by `sequence_number` from 0:
 * `response.created`, `response.in_progress`, `response.output_item.added`, `response.content_part.added`, one
 * `response.output_text.delta` per token, `response.output_text.done`, `response.content_part.done`,
 * `response.output_item.done`, `response.completed` (the whole response, with usage).
 */

/** The request fields a response echoes, as vLLM's sampling params resolved them. */
export interface ResponsesEcho {
  /** JSON of `instructions` (`null` when absent). */
  readonly instructions: string;
  /** JSON of `metadata`, `user`, `previous_response_id`. */
  readonly metadata: string;
  readonly user: string;
  readonly previousResponseId: string;
  /** `min(max_output_tokens, max_model_len - prompt tokens)`. */
  readonly maxOutputTokens: number;
  readonly temperature: number;
  readonly topP: number;
  /** The output message's id (`msg_…`). */
  readonly itemId: string;
}

function num(x: number): string {
  return Number.isInteger(x) ? x.toFixed(1) : String(x);
}

function outputText(text: string): string {
  return `{"annotations":[],"text":"${text}","type":"output_text","logprobs":null}`;
}

function messageItem(echo: ResponsesEcho, text: string | undefined): string {
  const content = text === undefined ? '' : outputText(text);
  const status = text === undefined ? 'in_progress' : 'completed';
  return `{"id":"${echo.itemId}","content":[${content}],"role":"assistant","status":"${status}","type":"message"}`;
}

function usage(view: ResponseView): string {
  const output = view.plan.count;
  return (
    `{"input_tokens":${view.promptTokens},"input_tokens_details":{"cached_tokens":${view.cachedTokens},` +
    `"input_tokens_per_turn":[],"cached_tokens_per_turn":[]},"output_tokens":${output},"output_tokens_details":` +
    `{"reasoning_tokens":0,"tool_output_tokens":0,"output_tokens_per_turn":[],"tool_output_tokens_per_turn":[]},` +
    `"total_tokens":${view.promptTokens + output}}`
  );
}

/** The response object: in progress (no output, no usage) or done. */
function responseObject(view: ResponseView, echo: ResponsesEcho, done: boolean): string {
  const cut = done && view.plan.finishReason === 'length';
  const status = !done ? 'in_progress' : cut ? 'incomplete' : 'completed';
  const output = done ? messageItem(echo, tokensText(view.outputKey, view.outputOffset, view.outputOffset + view.plan.count)) : '';
  return (
    `{"id":${JSON.stringify(view.id)},"created_at":${view.created},` +
    `"incomplete_details":${cut ? '{"reason":"max_output_tokens"}' : 'null'},"instructions":${echo.instructions},` +
    `"metadata":${echo.metadata},"model":${JSON.stringify(view.model)},"object":"response","output":[${output}],` +
    `"parallel_tool_calls":true,"temperature":${num(echo.temperature)},"tool_choice":"auto","tools":[],` +
    `"top_p":${num(echo.topP)},"background":false,"max_output_tokens":${echo.maxOutputTokens},"max_tool_calls":null,` +
    `"previous_response_id":${echo.previousResponseId},"prompt":null,"reasoning":null,"service_tier":"auto",` +
    `"status":"${status}","text":null,"top_logprobs":null,"truncation":"disabled",` +
    `"usage":${done ? usage(view) : 'null'},"user":${echo.user},"input_messages":null,"output_messages":null}`
  );
}

/** Events before the first delta: created, in_progress, output_item.added, content_part.added. */
const OPENING_EVENTS = 4;

/**
 * Stateless, as the stream writer asks a new framer for the closing events: event `n`'s sequence number follows
 * from its place (the opening events, then one per token, then the closing ones).
 */
class ResponsesFramer implements StreamFramer {
  constructor(
    readonly view: ResponseView,
    readonly echo: ResponsesEcho,
  ) {}

  #event(sequence: number, type: string, fields: string): string {
    return `event: ${type}\ndata: {${fields},"sequence_number":${sequence},"type":"${type}"}\n\n`;
  }

  #part(sequence: number, type: string, text: string): string {
    return this.#event(sequence, type, `"content_index":0,"item_id":"${this.echo.itemId}","output_index":0,"part":${outputText(text)}`);
  }

  open(): string {
    const initial = responseObject(this.view, this.echo, false);
    return (
      this.#event(0, 'response.created', `"response":${initial}`) +
      this.#event(1, 'response.in_progress', `"response":${initial}`) +
      this.#event(2, 'response.output_item.added', `"item":${messageItem(this.echo, undefined)},"output_index":0`) +
      this.#part(3, 'response.content_part.added', '')
    );
  }

  tokens(from: number, to: number): string {
    let out = '';
    for (let i = from; i < to; i++) {
      const delta = tokenText(this.view.outputKey, this.view.outputOffset + i);
      out += this.#event(
        OPENING_EVENTS + i,
        'response.output_text.delta',
        `"content_index":0,"delta":"${delta}","item_id":"${this.echo.itemId}","logprobs":[],"output_index":0`,
      );
    }
    return out;
  }

  close(): string {
    const count = this.view.plan.count;
    const text = tokensText(this.view.outputKey, this.view.outputOffset, this.view.outputOffset + count);
    const n = OPENING_EVENTS + count;
    return (
      this.#event(
        n,
        'response.output_text.done',
        `"content_index":0,"item_id":"${this.echo.itemId}","logprobs":[],"output_index":0,"text":"${text}"`,
      ) +
      this.#part(n + 1, 'response.content_part.done', text) +
      this.#event(n + 2, 'response.output_item.done', `"item":${messageItem(this.echo, text)},"output_index":0`) +
      this.#event(n + 3, 'response.completed', `"response":${responseObject(this.view, this.echo, true)}`)
    );
  }
}

/** The Responses API format of one request (its echoed fields are per request). */
export function vllmResponsesFormat(echo: ResponsesEcho): ResponseFormat {
  return {
    body: (view) => responseObject(view, echo, true),
    framer: (view) => new ResponsesFramer(view, echo),
  };
}
