import type { AnswerCodec, RelayedAnswer, SseEvent, StreamRelay } from '@triad/connectors';
import { engineErrorMessage, SseEventSplitter, sseEvents } from '@triad/connectors';
import { ErrorCode } from '@triad/errors';
import { UpstreamError, type Usage } from '@triad/request';
import { AnthropicStreamTranslator, anthropicErrorToOpenAi, anthropicToChat } from './anthropic-translation';
import type { ProviderCall } from './provider-call';
import { StreamUsage, bodyUsage } from './provider-usage';

/** Provider answers worth another try before any byte went out; the last try's answer goes to the client. */
const RETRY_STATUS: ReadonlySet<number> = new Set([502, 503, 504]);
const REDACTED = '[redacted]';
const EMPTY = Buffer.alloc(0);

/** Replaces every occurrence of the credential (providers sometimes echo the key they refused). */
export function scrub(text: string, secret: string | undefined): string {
  return secret === undefined || secret.length < 4 ? text : text.split(secret).join(REDACTED);
}

/** An event stream rewritten event by event (chunks may cut events anywhere). */
abstract class EventStream implements StreamRelay {
  readonly #splitter = new SseEventSplitter();

  abstract get usage(): Usage | undefined;

  /** What the client gets for one event ('' for nothing). */
  protected abstract rewrite(event: SseEvent): string;

  push(chunk: Buffer): Buffer {
    return this.#rewriteAll(this.#splitter.push(chunk));
  }

  flush(): Buffer {
    // A stream may end with blank lines after its last event: nothing to relay.
    const rest = this.#splitter.end();
    return rest.toString('utf8').trim() === '' ? EMPTY : this.#rewriteAll(rest);
  }

  #rewriteAll(bytes: Buffer): Buffer {
    let out = '';
    for (const e of sseEvents(bytes)) out += this.rewrite(e);
    return out === '' ? EMPTY : Buffer.from(out);
  }
}

/** A provider's own stream relayed as it is, its usage read and the usage chunk the gateway asked for removed. */
class UsageStream extends EventStream {
  readonly #usage: StreamUsage;

  constructor(call: ProviderCall) {
    super();
    this.#usage = new StreamUsage(call.protocol, call.injectedUsage);
  }

  get usage(): Usage | undefined {
    return this.#usage.usage;
  }

  protected rewrite(event: SseEvent): string {
    return this.#usage.observe(event) ? '' : event.raw;
  }
}

/** An Anthropic Messages stream translated into `chat.completion.chunk` events. */
class TranslatedStream extends EventStream {
  readonly contentType = 'text/event-stream';
  readonly #translator: AnthropicStreamTranslator;

  constructor(call: ProviderCall) {
    super();
    this.#translator = new AnthropicStreamTranslator(call.model, Math.floor(Date.now() / 1000), call.clientWantsUsage);
  }

  get usage(): Usage | undefined {
    return this.#translator.usage;
  }

  incomplete(): Error | undefined {
    return this.#translator.completed ? undefined : new Error('the provider stream ended before message_stop');
  }

  protected rewrite(event: SseEvent): string {
    return this.#translator.translate(event);
  }
}

/**
 * How one try's answer reaches the client: usage read as the provider's API reports it, an Anthropic answer to an
 * OpenAI chat request translated, and an error answer (scrubbed of the credential) passed through as Kthena does —
 * unless it is a 502/503/504 and a try is left. `passedThrough` is the error of an answer the client got.
 */
export class ProviderAnswers implements AnswerCodec {
  passedThrough: UpstreamError | undefined = undefined;
  readonly #call: ProviderCall;
  readonly #secret: string | undefined;
  readonly #endpoint: string;
  readonly #last: boolean;

  constructor(call: ProviderCall, secret: string | undefined, endpoint: string, last: boolean) {
    this.#call = call;
    this.#secret = secret;
    this.#endpoint = endpoint;
    this.#last = last;
  }

  stream(): StreamRelay {
    return this.#call.translate ? new TranslatedStream(this.#call) : new UsageStream(this.#call);
  }

  whole(body: Buffer, contentType: string): RelayedAnswer {
    const call = this.#call;
    if (!call.translate) return { contentType, body, usage: bodyUsage(call.protocol, body.toString('utf8')) };
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      throw new Error('the provider answered with a body that is not JSON');
    }
    const chat = anthropicToChat(parsed as Record<string, unknown>, call.model, Math.floor(Date.now() / 1000));
    return { contentType: 'application/json', body: Buffer.from(JSON.stringify(chat.body)), usage: chat.usage };
  }

  failed(status: number, body: Buffer): { error: Error; answer?: RelayedAnswer } {
    const text = scrub(body.toString('utf8'), this.#secret);
    const retry = RETRY_STATUS.has(status);
    const error = new UpstreamError(
      ErrorCode.UpstreamError,
      `external model provider answered HTTP ${status} on ${this.#endpoint}: ${engineErrorMessage(Buffer.from(text))}`,
      { stage: 'aggregated', endpoint: this.#endpoint, item: -1, status },
      retry,
    );
    if (retry && !this.#last) return { error };
    this.passedThrough = error;
    // A translated request gets the provider's error in the OpenAI shape.
    const answer = this.#call.translate ? anthropicErrorToOpenAi(text, status) : text;
    return { error, answer: { contentType: 'application/json', body: Buffer.from(answer) } };
  }
}
