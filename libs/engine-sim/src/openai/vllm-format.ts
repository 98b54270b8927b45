import { tokenText, tokensText } from '../engine/tokens';
import { DONE_EVENT, usageFields, type BodyExtras, type ResponseFormat, type ResponseView, type StreamFramer } from './format';

/**
 * vLLM's OpenAI responses, byte-compatible with what its pydantic models print: chat chunks are dumped with
 * `exclude_unset` (no `usage` key unless continuous usage), the finish reason rides on the last content chunk with
 * `stop_reason`, and the usage chunk has `choices: []` and no null fields.
 */
function head(view: ResponseView, object: string): string {
  return `{"id":${JSON.stringify(view.id)},"object":"${object}","created":${view.created},"model":${JSON.stringify(view.model)}`;
}

function finishOf(view: ResponseView, i: number): string {
  return i === view.plan.count - 1 ? `"${view.plan.finishReason}","stop_reason":null` : 'null';
}

function usageChunk(view: ResponseView, object: string): string {
  return view.includeUsage
    ? `data: ${head(view, object)},"choices":[],"usage":${usageFields(view.promptTokens, view.plan.count)}}}\n\n`
    : '';
}

class VllmChatFramer implements StreamFramer {
  readonly #prefix: string;
  constructor(readonly view: ResponseView) {
    this.#prefix = `data: ${head(view, 'chat.completion.chunk')},"choices":[{"index":0,"delta":`;
  }
  #usage(completion: number): string {
    return this.view.continuousUsage ? `,"usage":${usageFields(this.view.promptTokens, completion)}}` : '';
  }
  open(): string {
    return `${this.#prefix}{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${this.#usage(0)}}\n\n`;
  }
  tokens(from: number, to: number): string {
    let out = '';
    for (let i = from; i < to; i++) {
      out +=
        `${this.#prefix}{"content":"${tokenText(this.view.outputKey, this.view.outputOffset + i)}"},"logprobs":null,` +
        `"finish_reason":${finishOf(this.view, i)}}]${this.#usage(i + 1)}}\n\n`;
    }
    return out;
  }
  close(): string {
    return usageChunk(this.view, 'chat.completion.chunk') + DONE_EVENT;
  }
}

class VllmCompletionFramer implements StreamFramer {
  readonly #prefix: string;
  constructor(readonly view: ResponseView) {
    this.#prefix = `data: ${head(view, 'text_completion')},"choices":[{"index":0,"text":"`;
  }
  open(): string {
    return '';
  }
  tokens(from: number, to: number): string {
    let out = '';
    for (let i = from; i < to; i++) {
      const usage = this.view.continuousUsage ? `${usageFields(this.view.promptTokens, i + 1)}}` : 'null';
      const finish = i === this.view.plan.count - 1 ? `"${this.view.plan.finishReason}"` : 'null';
      out +=
        `${this.#prefix}${tokenText(this.view.outputKey, this.view.outputOffset + i)}","logprobs":null,"finish_reason":${finish},"stop_reason":null}],` +
        `"usage":${usage}}\n\n`;
    }
    return out;
  }
  close(): string {
    return usageChunk(this.view, 'text_completion') + DONE_EVENT;
  }
}

function bodyUsage(view: ResponseView): string {
  return `${usageFields(view.promptTokens, view.plan.count)},"prompt_tokens_details":null}`;
}

function extrasText(extras: BodyExtras): string {
  return `,"kv_transfer_params":${extras.kvTransferParams ?? 'null'}${
    extras.ecTransferParams ? `,"ec_transfer_params":${extras.ecTransferParams}` : ''
  }`;
}

export const vllmChatFormat: ResponseFormat = {
  body(view, extras) {
    const text = tokensText(view.outputKey, view.outputOffset, view.outputOffset + view.plan.count);
    return (
      `${head(view, 'chat.completion')},"choices":[{"index":0,` +
      `"message":{"role":"assistant","content":"${text}","reasoning_content":null,"tool_calls":[]},` +
      `"logprobs":null,"finish_reason":"${view.plan.finishReason}","stop_reason":null}],"usage":${bodyUsage(view)},` +
      `"prompt_logprobs":null${extrasText(extras)}}`
    );
  },
  framer: (view) => new VllmChatFramer(view),
};

export const vllmCompletionFormat: ResponseFormat = {
  body(view, extras) {
    const text = tokensText(view.outputKey, view.outputOffset, view.outputOffset + view.plan.count);
    return (
      `${head(view, 'text_completion')},"choices":[{"index":0,"text":"${text}","logprobs":null,` +
      `"finish_reason":"${view.plan.finishReason}","stop_reason":null,"prompt_logprobs":null}],` +
      `"usage":${bodyUsage(view)}${extrasText(extras)}}`
    );
  },
  framer: (view) => new VllmCompletionFramer(view),
};
