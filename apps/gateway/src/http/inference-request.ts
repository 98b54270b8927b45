import type { Decision, Stage } from '@triad/bus';
import { emptyResult, type ClientSink, type MediaPart, type ProxyCall, type ServerProfile, type StageObserver } from '@triad/connectors';
import type { HookRequest, StageSpan } from '../hooks';

const NO_MEDIA: readonly MediaPart[] = [];

/**
 * One inference request: what hooks see (HookRequest) and what the stage loop runs (ProxyCall), in one object so
 * a request allocates little. Fields are filled in as the pipeline advances (routed, scheduled, proxied).
 */
export class InferenceRequest implements HookRequest, ProxyCall {
  readonly id: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly model: string;
  readonly body: Record<string, unknown>;
  readonly stream: boolean;
  readonly inputTokens: number;
  readonly prompt: string;
  readonly receivedAt: number;
  readonly sink: ClientSink;
  readonly observer: StageObserver;
  readonly upstreamHeaders: Record<string, string>;
  readonly result = emptyResult();
  route: string | undefined = undefined;
  modelServer: string | undefined = undefined;
  traceId: string | undefined = undefined;
  upstreamModel = '';
  mode = '';
  clientWantsUsage = false;
  injectUsage = false;
  media: readonly MediaPart[] = NO_MEDIA;
  epdBootstrapAddr: string | undefined = undefined;
  server!: ServerProfile;
  decision!: Decision;
  abort: ((reason: Error) => void) | undefined = undefined;
  scheduleMs = 0;
  decidedLocally = false;
  /** Pod names per stage, for the access log. */
  readonly endpoints: Partial<Record<Stage, string[]>> = {};
  /** Open stage spans from tracing hooks, by leg. */
  spans: Map<object, StageSpan> | undefined = undefined;
  #locals: Record<string, unknown> | undefined;
  #abortController: AbortController | undefined;

  constructor(
    id: string,
    method: string,
    path: string,
    headers: Readonly<Record<string, string | string[] | undefined>>,
    body: Record<string, unknown>,
    model: string,
    prompt: string,
    inputTokens: number,
    receivedAt: number,
    sink: ClientSink,
    observer: StageObserver,
    upstreamHeaders: Record<string, string>,
  ) {
    this.id = id;
    this.method = method;
    this.path = path;
    this.headers = headers;
    this.body = body;
    this.model = model;
    this.stream = body['stream'] === true;
    this.prompt = prompt;
    this.inputTokens = inputTokens;
    this.receivedAt = receivedAt;
    this.sink = sink;
    this.observer = observer;
    this.upstreamHeaders = upstreamHeaders;
  }

  get locals(): Record<string, unknown> {
    this.#locals ??= {};
    return this.#locals;
  }

  get signal(): AbortSignal {
    this.#abortController ??= new AbortController();
    if (this.sink.destroyed && !this.#abortController.signal.aborted) this.#abortController.abort();
    return this.#abortController.signal;
  }

  /** The client closed the connection before the answer was complete: abort legs and anyone waiting. */
  clientGone(reason: Error): void {
    this.#abortController?.abort(reason);
    this.abort?.(reason);
  }
}
