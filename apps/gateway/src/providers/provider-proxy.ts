import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher } from 'undici';
import type { Decision, EndpointRef, ExternalProviderRecord } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import {
  NotFoundError,
  RequestError,
  UpstreamError,
  asError,
  writeStreamError,
  type ProxyRequest,
  type RequestContext,
  type RequestHooks,
  type RoutedRequest,
  type ServerProfile,
} from '@triad/request';
import { engineErrorMessage } from '@triad/connectors';
import type { GatewayMetrics } from '../observability/metrics';
import type { GatewayObserver } from '../http/gateway-observer';
import type { RouteMatch } from '../routing/route-table';
import { AnthropicStreamTranslator, anthropicErrorToOpenAi, anthropicToChat } from './anthropic-translation';
import { buildProviderCall, type ProviderCall } from './provider-call';
import { isResolved, type ProviderDirectory, type ResolvedProvider } from './provider-directory';
import { SseEventSplitter } from './sse-events';
import { StreamUsage, bodyUsage } from './provider-usage';

export interface ProviderProxyOptions {
  /** Tries after the first on a transport failure, a timeout or a 502/503/504 answer, before any byte went out. */
  readonly retries: number;
  readonly retryIntervalMs: number;
  /** From sending the request to the provider's response headers; 0 disables. */
  readonly firstByteTimeoutMs: number;
  /** The whole request, from arrival to the last byte; 0 disables. */
  readonly totalTimeoutMs: number;
}

export interface ProviderProxyDeps {
  readonly directory: ProviderDirectory;
  readonly hooks: RequestHooks;
  readonly observer: GatewayObserver;
  readonly metrics: GatewayMetrics;
  readonly options: ProviderProxyOptions;
}

const MAX_ERROR_BODY = 64 * 1024;
const RETRY_STATUS: ReadonlySet<number> = new Set([502, 503, 504]);
const REDACTED = '[redacted]';

/** Replaces every occurrence of the credential (providers sometimes echo the key they refused). */
function scrub(text: string, secret: string | undefined): string {
  return secret === undefined || secret.length < 4 ? text : text.split(secret).join(REDACTED);
}

async function readText(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size < limit) chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Where a provider call failed, for UpstreamError (the provider stands where an engine endpoint would). */
function failure(endpoint: EndpointRef, status: number) {
  return { stage: 'aggregated' as const, endpoint: endpoint.key, item: -1, status };
}

/** The profile a provider target gets in `ctx.routing`: metrics and logs name it `namespace/provider`. */
function profileOf(record: ExternalProviderRecord, options: ProviderProxyOptions): ServerProfile {
  return {
    namespace: record.namespace,
    name: record.name,
    key: `${record.namespace}/${record.name}`,
    engine: 'vLLM',
    provider: record.spec.providerType,
    mode: 'aggregated',
    connector: 'aggregated',
    retry: { retries: options.retries, intervalMs: options.retryIntervalMs },
    timeouts: { encodeMs: 0, prefillMs: 0, firstByteMs: options.firstByteTimeoutMs, totalMs: options.totalTimeoutMs },
    relayKvParams: false,
  };
}

/** The endpoint a provider's calls are recorded against (span `server.address`, access-log `endpoints`). */
function endpointOf(record: ExternalProviderRecord): EndpointRef {
  const url = new URL(record.spec.baseURL);
  return { key: `${record.namespace}.${record.name}`, pod: record.name, ip: url.hostname, port: Number(url.port || 443) };
}

/** One request's run against a provider: the client's departure and the total timeout abort the call in flight. */
class ProviderRun {
  aborted: Error | undefined;
  committed = false;
  controller: AbortController | undefined;
  #drained: (() => void) | undefined;

  abort(reason: Error): void {
    this.aborted ??= reason;
    this.controller?.abort(reason);
    this.#drained?.();
  }

  /** Waits for a slow client to drain, or for the run to be aborted (a client that left never drains). */
  drain(sink: ProxyRequest['sink']): Promise<void> {
    if (this.aborted !== undefined) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#drained = resolve;
      sink.once('drain', () => {
        this.#drained = undefined;
        resolve();
      });
    });
  }
}

/**
 * Serves ModelRoute targets that name an ExternalModelProvider: OpenAI providers get chat, completions and
 * responses requests as they are; Anthropic providers get `/v1/messages` as it is and chat completions
 * translated both ways (streams too). Auth comes from the sealed credential, static headers from the spec;
 * failures before the first byte are retried; usage is read from the answer for rate limits and metrics; each
 * call is a stage span (through the hooks). The credential never reaches a log line, a span or an error body.
 */
export class ProviderProxy {
  readonly #d: ProviderProxyDeps;
  readonly #secure = new Agent({ keepAliveTimeout: 30_000 });
  readonly #insecure = new Agent({ keepAliveTimeout: 30_000, connect: { rejectUnauthorized: false } });

  constructor(deps: ProviderProxyDeps) {
    this.#d = deps;
  }

  async close(): Promise<void> {
    await Promise.all([this.#secure.close(), this.#insecure.close()]);
  }

  /** Runs `ctx` against the provider `match.provider`; failures before the answer started are thrown. */
  async serve(ctx: RequestContext, match: RouteMatch & { provider: string }): Promise<void> {
    const d = this.#d;
    const resolved = d.directory.resolve(match.namespace, match.provider);
    if (!isResolved(resolved)) {
      if (!resolved.found) throw new NotFoundError(resolved.message, 'model');
      throw new RequestError(ErrorCode.ProviderUnavailable, resolved.message);
    }
    const record = resolved.record;
    const call = buildProviderCall(record, ctx.path, ctx.body, ctx.model, ctx.headers, ctx.id);
    ctx.routed({
      route: match.route,
      namespace: match.namespace,
      serverName: record.name,
      lora: false,
      server: profileOf(record, d.options),
      upstreamModel: call.model,
    });
    d.metrics.downstream(ctx.model, 1);
    const routed: RoutedRequest = ctx as RoutedRequest;
    d.hooks.onRouted?.(routed);
    const endpoint = endpointOf(record);
    const decision: Decision = {
      id: ctx.id,
      ok: true,
      mode: 'aggregated',
      attempts: [{ endpoint }],
      encoders: [],
      decidedBy: 'external-provider',
    };
    routed.scheduled({ decision, local: true, durationMs: 0 });
    routed.prepared({
      decision,
      connector: 'aggregated',
      injectUsage: call.injectedUsage,
      clientWantsUsage: call.clientWantsUsage,
      media: [],
      dpRank: undefined,
    });
    d.hooks.onScheduled?.(routed);
    await this.#run(routed, resolved, call, endpoint);
  }

  async #run(ctx: ProxyRequest, provider: ResolvedProvider, call: ProviderCall, endpoint: EndpointRef): Promise<void> {
    const { options } = this.#d;
    const run = new ProviderRun();
    ctx.attach(run);
    const left = options.totalTimeoutMs > 0 ? Math.max(1, options.totalTimeoutMs - (performance.now() - ctx.receivedAt)) : 0;
    const total =
      left > 0
        ? setTimeout(
            () =>
              run.abort(
                new UpstreamError(
                  ErrorCode.UpstreamTimeout,
                  `request exceeded the total timeout of ${options.totalTimeoutMs} ms`,
                  failure(endpoint, 0),
                  false,
                ),
              ),
            left,
          )
        : undefined;
    const started = performance.now();
    try {
      for (let attempt = 0; ; attempt++) {
        ctx.result.attempt = attempt;
        ctx.result.tries = attempt + 1;
        try {
          await this.#attempt(ctx, run, provider, call, endpoint, attempt, attempt >= options.retries);
          break;
        } catch (err) {
          const error = run.aborted ?? asError(err);
          const retryable = error instanceof UpstreamError && error.retryable;
          if (run.aborted !== undefined || run.committed || attempt >= options.retries || !retryable) throw error;
          this.#d.observer.retry(ctx, attempt, error);
          await new Promise((resolve) => setTimeout(resolve, options.retryIntervalMs));
          if (run.aborted !== undefined) throw run.aborted;
        }
      }
    } catch (err) {
      if (!run.committed) throw err;
      // The answer had started: end it with an error event, as the engines' streams end.
      ctx.result.error = asError(err);
      if (call.protocol === 'anthropic-messages' && !call.translate) {
        const message = scrub(ctx.result.error.message, provider.secret);
        if (!ctx.sink.destroyed && !ctx.sink.writableEnded) {
          ctx.sink.end(`event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'api_error', message } })}\n\n`);
        }
      } else writeStreamError(ctx.sink, err);
    } finally {
      if (total !== undefined) clearTimeout(total);
      ctx.result.decodeMs = performance.now() - started;
    }
  }

  async #attempt(
    ctx: ProxyRequest,
    run: ProviderRun,
    provider: ResolvedProvider,
    call: ProviderCall,
    endpoint: EndpointRef,
    attempt: number,
    last: boolean,
  ): Promise<void> {
    const d = this.#d;
    (ctx.result.endpoints.aggregated ??= []).push(endpoint.pod);
    const span = d.hooks.onStageStart?.(ctx, 'aggregated', endpoint, attempt);
    const headers = { ...call.headers, ...span?.headers };
    if (provider.auth !== undefined) headers[provider.auth[0]] = provider.auth[1];
    d.metrics.upstream(endpoint.pod, 'aggregated', 1);
    const controller = new AbortController();
    run.controller = controller;
    const firstByteMs = d.options.firstByteTimeoutMs;
    const timer =
      firstByteMs > 0
        ? setTimeout(
            () =>
              controller.abort(
                new UpstreamError(
                  ErrorCode.UpstreamTimeout,
                  `external model provider ${endpoint.key} exceeded the first-byte timeout of ${firstByteMs} ms`,
                  failure(endpoint, 0),
                  true,
                ),
              ),
            firstByteMs,
          )
        : undefined;
    let status = 0;
    let ok = false;
    let error: Error | undefined;
    try {
      const agent = provider.record.spec.insecureSkipVerify ? this.#insecure : this.#secure;
      let res: Dispatcher.ResponseData;
      try {
        res = await agent.request({
          origin: call.origin,
          path: call.path,
          method: 'POST',
          headers,
          body: call.body,
          signal: controller.signal,
          headersTimeout: 0,
          bodyTimeout: 0,
        });
      } catch (err) {
        throw this.#transportError(controller, endpoint, err);
      } finally {
        if (timer !== undefined) clearTimeout(timer);
      }
      status = res.statusCode;
      if (status < 200 || status >= 300) {
        const text = scrub(await readText(res.body, MAX_ERROR_BODY), provider.secret);
        const upstream = new UpstreamError(
          ErrorCode.UpstreamError,
          `external model provider ${endpoint.key} answered HTTP ${status}: ${engineErrorMessage(Buffer.from(text))}`,
          failure(endpoint, status),
          RETRY_STATUS.has(status),
        );
        if (!last && RETRY_STATUS.has(status)) throw upstream;
        // Kthena passes a provider's error answer through; a translated request gets it in the OpenAI shape.
        this.#answer(ctx, run, status, 'application/json', call.translate ? anthropicErrorToOpenAi(text, status) : text);
        ctx.result.error = upstream;
        error = upstream;
        return;
      }
      const contentType = String(res.headers['content-type'] ?? 'application/json');
      try {
        if (contentType.startsWith('text/event-stream')) await this.#stream(ctx, run, call, res, contentType);
        else await this.#whole(ctx, run, call, res, contentType);
      } catch (err) {
        throw this.#transportError(controller, endpoint, err, status);
      }
      ok = true;
    } catch (err) {
      error = asError(err);
      throw err;
    } finally {
      if (run.controller === controller) run.controller = undefined;
      d.metrics.upstream(endpoint.pod, 'aggregated', -1);
      d.metrics.leg(`${provider.record.namespace}/${provider.record.name}`, 'aggregated', ok);
      span?.end(ok, status, error);
    }
  }

  #transportError(controller: AbortController, endpoint: EndpointRef, err: unknown, status = 0): Error {
    const reason: unknown = controller.signal.reason;
    if (controller.signal.aborted && reason instanceof Error) return reason;
    const cause = asError(err);
    const code = (cause as { code?: unknown }).code;
    const connect = code === 'ECONNREFUSED' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'EHOSTUNREACH' || code === 'ENOTFOUND';
    return new UpstreamError(
      connect ? ErrorCode.UpstreamConnect : ErrorCode.UpstreamError,
      `external model provider ${endpoint.key} failed: ${cause.message}`,
      failure(endpoint, status),
      true,
      cause,
    );
  }

  /** Writes a complete answer (the provider's JSON, translated or not, or its error body). */
  #answer(ctx: ProxyRequest, run: ProviderRun, status: number, contentType: string, text: string): void {
    const sink = ctx.sink;
    if (sink.destroyed || sink.headersSent) return;
    run.committed = true;
    ctx.result.status = status;
    ctx.result.firstByteAt = performance.now();
    const body = Buffer.from(text);
    sink.writeHead(status, { 'content-type': contentType, 'content-length': body.length, 'x-request-id': ctx.id });
    this.#d.observer.firstByte(ctx);
    sink.end(body);
  }

  async #whole(ctx: ProxyRequest, run: ProviderRun, call: ProviderCall, res: Dispatcher.ResponseData, contentType: string): Promise<void> {
    const text = await readText(res.body, Number.MAX_SAFE_INTEGER);
    if (call.translate) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new Error('the provider answered with a body that is not JSON');
      }
      const { body, usage } = anthropicToChat(parsed as Record<string, unknown>, call.model, Math.floor(Date.now() / 1000));
      if (usage !== undefined) ctx.result.usage = usage;
      this.#answer(ctx, run, res.statusCode, 'application/json', JSON.stringify(body));
      return;
    }
    const usage = bodyUsage(call.protocol, text);
    if (usage !== undefined) ctx.result.usage = usage;
    this.#answer(ctx, run, res.statusCode, contentType, text);
  }

  async #stream(ctx: ProxyRequest, run: ProviderRun, call: ProviderCall, res: Dispatcher.ResponseData, contentType: string): Promise<void> {
    const sink = ctx.sink;
    const splitter = new SseEventSplitter();
    const translator = call.translate
      ? new AnthropicStreamTranslator(call.model, Math.floor(Date.now() / 1000), call.clientWantsUsage)
      : undefined;
    const usage = translator === undefined ? new StreamUsage(call.protocol, call.injectedUsage) : undefined;
    const relay = (events: ReturnType<SseEventSplitter['push']>): string => {
      let out = '';
      for (const e of events) {
        if (translator !== undefined) out += translator.translate(e);
        else if (!usage!.observe(e)) out += e.raw;
      }
      return out;
    };
    const write = async (text: string): Promise<void> => {
      if (text === '' || sink.destroyed || sink.writableEnded) return;
      if (!run.committed) {
        if (sink.headersSent) return;
        run.committed = true;
        ctx.result.status = res.statusCode;
        ctx.result.firstByteAt = performance.now();
        sink.writeHead(res.statusCode, {
          'content-type': translator !== undefined ? 'text/event-stream' : contentType,
          'cache-control': 'no-cache',
          'x-request-id': ctx.id,
        });
        this.#d.observer.firstByte(ctx);
      }
      if (!sink.write(text)) await run.drain(sink);
    };
    for await (const chunk of res.body) {
      await write(relay(splitter.push(chunk as Buffer)));
      if (run.aborted !== undefined) throw run.aborted;
    }
    await write(relay(splitter.end()));
    const counted = translator?.usage ?? usage?.usage;
    if (counted !== undefined) ctx.result.usage = counted;
    if (translator !== undefined && !translator.completed) throw new Error('the provider stream ended before message_stop');
    if (!sink.destroyed && !sink.writableEnded) sink.end();
  }
}
