import { EOS_TOKEN_ID, tokenId, tokenText, tokensText } from '../engine/tokens';
import { DONE_EVENT, usageFields, type ResponseFormat, type ResponseView, type StreamFramer } from './format';

/**
 * SGLang's OpenAI and native responses as its pydantic models print them with `model_dump_json()` (no exclusions):
 * every delta carries role/content/reasoning_content/tool_calls, chunks carry `"usage":null`, the finish reason comes
 * in a separate chunk with an empty delta and `matched_stop`, and usage objects include `prompt_tokens_details`.
 */
function head(view: ResponseView, object: string): string {
  return `{"id":${JSON.stringify(view.id)},"object":"${object}","created":${view.created},"model":${JSON.stringify(view.model)}`;
}

function matchedStop(view: ResponseView): string {
  return view.plan.finishReason === 'stop' ? String(EOS_TOKEN_ID) : 'null';
}

function usageObject(view: ResponseView, completion: number): string {
  return `${usageFields(view.promptTokens, completion)},"prompt_tokens_details":null}`;
}

function usageChunk(view: ResponseView, object: string): string {
  return view.includeUsage ? `data: ${head(view, object)},"choices":[],"usage":${usageObject(view, view.plan.count)}}\n\n` : '';
}

class SglangChatFramer implements StreamFramer {
  readonly #prefix: string;
  constructor(readonly view: ResponseView) {
    this.#prefix = `data: ${head(view, 'chat.completion.chunk')},"choices":[{"index":0,"delta":`;
  }
  open(): string {
    return (
      `${this.#prefix}{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},"logprobs":null,` +
      `"finish_reason":null,"matched_stop":null}],"usage":null}\n\n`
    );
  }
  tokens(from: number, to: number): string {
    let out = '';
    for (let i = from; i < to; i++) {
      const usage = this.view.continuousUsage ? usageObject(this.view, i + 1) : 'null';
      out +=
        `${this.#prefix}{"role":null,"content":"${tokenText(this.view.outputKey, this.view.outputOffset + i)}","reasoning_content":null,"tool_calls":null},` +
        `"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":${usage}}\n\n`;
    }
    return out;
  }
  close(): string {
    const finish =
      `${this.#prefix}{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,` +
      `"finish_reason":"${this.view.plan.finishReason}","matched_stop":${matchedStop(this.view)}}],"usage":null}\n\n`;
    return finish + usageChunk(this.view, 'chat.completion.chunk') + DONE_EVENT;
  }
}

class SglangCompletionFramer implements StreamFramer {
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
      const last = i === this.view.plan.count - 1;
      const finish = last ? `"${this.view.plan.finishReason}","matched_stop":${matchedStop(this.view)}` : 'null,"matched_stop":null';
      const usage = this.view.continuousUsage ? usageObject(this.view, i + 1) : 'null';
      out += `${this.#prefix}${tokenText(this.view.outputKey, this.view.outputOffset + i)}","logprobs":null,"finish_reason":${finish}}],"usage":${usage}}\n\n`;
    }
    return out;
  }
  close(): string {
    return usageChunk(this.view, 'text_completion') + DONE_EVENT;
  }
}

const METADATA = ',"metadata":{"weight_version":"default"}';

export const sglangChatFormat: ResponseFormat = {
  body(view) {
    const text = tokensText(view.outputKey, view.outputOffset, view.outputOffset + view.plan.count);
    return (
      `${head(view, 'chat.completion')},"choices":[{"index":0,` +
      `"message":{"role":"assistant","content":"${text}","reasoning_content":null,"tool_calls":null},` +
      `"logprobs":null,"finish_reason":"${view.plan.finishReason}","matched_stop":${matchedStop(view)}}],` +
      `"usage":${usageObject(view, view.plan.count)}${METADATA}}`
    );
  },
  framer: (view) => new SglangChatFramer(view),
};

export const sglangCompletionFormat: ResponseFormat = {
  body(view) {
    const text = tokensText(view.outputKey, view.outputOffset, view.outputOffset + view.plan.count);
    return (
      `${head(view, 'text_completion')},"choices":[{"index":0,"text":"${text}","logprobs":null,` +
      `"finish_reason":"${view.plan.finishReason}","matched_stop":${matchedStop(view)}}],` +
      `"usage":${usageObject(view, view.plan.count)}${METADATA}}`
    );
  },
  framer: (view) => new SglangCompletionFramer(view),
};

/** SGLang's native finish reason object: `{"type":"length","length":N}` or `{"type":"stop","matched":id}`. */
export function generateFinishReason(reason: 'stop' | 'length', completion: number): string {
  return reason === 'length' ? `{"type":"length","length":${completion}}` : `{"type":"stop","matched":${EOS_TOKEN_ID}}`;
}

/**
 * SGLang native `meta_info` in tokenizer_manager.py's key order, with `finish` already JSON (`null` while running);
 * the counts are the request's so far.
 */
export function generateMetaInfo(
  view: Pick<ResponseView, 'id' | 'promptTokens' | 'cachedTokens' | 'elapsedSec'>,
  completion: number,
  finish: string,
): string {
  const e2e = finish !== 'null' && view.elapsedSec ? `,"e2e_latency":${view.elapsedSec()}` : '';
  return (
    `{"id":${JSON.stringify(view.id)},"finish_reason":${finish},"prompt_tokens":${view.promptTokens},"weight_version":"default",` +
    `"num_retractions":0,"reasoning_tokens":0,"completion_tokens":${completion},"cached_tokens":${view.cachedTokens}${e2e}}`
  );
}

function metaInfo(view: ResponseView, completion: number, finished: boolean): string {
  return generateMetaInfo(view, completion, finished ? generateFinishReason(view.plan.finishReason, completion) : 'null');
}

/**
 * SGLang `/generate` streams cumulative text and output ids (not deltas; upstream's default, without
 * `--incremental-streaming-output`), one event per token.
 */
class SglangGenerateFramer implements StreamFramer {
  #text = '';
  #ids = '';
  constructor(readonly view: ResponseView) {}
  open(): string {
    return '';
  }
  tokens(from: number, to: number): string {
    let out = '';
    for (let i = from; i < to; i++) {
      this.#text += tokenText(this.view.outputKey, this.view.outputOffset + i);
      const id = tokenId(this.view.outputKey, this.view.outputOffset + i);
      this.#ids = this.#ids === '' ? String(id) : `${this.#ids},${id}`;
      const meta = metaInfo(this.view, i + 1, i === this.view.plan.count - 1);
      out += `data: {"text":"${this.#text}","output_ids":[${this.#ids}],"meta_info":${meta}}\n\n`;
    }
    return out;
  }
  close(): string {
    return DONE_EVENT;
  }
}

export const sglangGenerateFormat: ResponseFormat = {
  body(view) {
    const ids: number[] = [];
    for (let i = 0; i < view.plan.count; i++) ids.push(tokenId(view.outputKey, view.outputOffset + i));
    return (
      `{"text":"${tokensText(view.outputKey, view.outputOffset, view.outputOffset + view.plan.count)}","output_ids":[${ids.join(',')}],` +
      `"meta_info":${metaInfo(view, view.plan.count, true)}}`
    );
  },
  framer: (view) => new SglangGenerateFramer(view),
};
