// Builders for tests of code that takes a request: a sink that records what the client would get, a context
// with defaults, and a context already routed, scheduled and prepared for a connector or the stage loop.
import type { Decision } from '@triad/bus';
import type { ClientSink } from '../client-sink';
import type { DpRankPicker } from '../context/parts';
import { extractMediaParts, type MediaPart } from '../body/media';
import { RequestContext, type EngineRequest, type IncomingHeaders } from '../context/request-context';
import type { EngineRouting } from '../context/parts';
import { DEFAULT_STAGE_TIMEOUTS, type ServerProfile } from '../server-profile';

/** A ClientSink that keeps what was written: status, headers, the body chunks and whether it ended. */
export class RecordingSink implements ClientSink {
  status = 0;
  headers: Record<string, string | number> = {};
  readonly chunks: Buffer[] = [];
  destroyed = false;
  headersSent = false;
  writableEnded = false;

  writeHead(status: number, headers: Record<string, string | number>): this {
    this.status = status;
    this.headers = headers;
    this.headersSent = true;
    return this;
  }

  write(chunk: Buffer | string): boolean {
    this.chunks.push(Buffer.from(chunk));
    return true;
  }

  end(chunk?: Buffer | string): this {
    if (chunk !== undefined) this.chunks.push(Buffer.from(chunk));
    this.writableEnded = true;
    return this;
  }

  once(): this {
    return this;
  }

  /** Everything written, as text. */
  get text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

interface RequestContextInit {
  readonly id?: string;
  readonly method?: string;
  readonly path?: string;
  readonly headers?: IncomingHeaders;
  readonly body?: Record<string, unknown>;
  readonly prompt?: string;
  readonly inputTokens?: number;
  readonly receivedAt?: number;
  readonly sink?: ClientSink;
  readonly upstreamHeaders?: Record<string, string>;
}

/** A request as it arrives (defaults: `POST /v1/chat/completions`, model `m`, one user message). */
export function requestContext(init: RequestContextInit = {}): RequestContext {
  const body = init.body ?? { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
  return new RequestContext(
    init.id ?? 'req-1',
    init.method ?? 'POST',
    init.path ?? '/v1/chat/completions',
    init.headers ?? {},
    body,
    init.prompt ?? '',
    init.inputTokens ?? 0,
    init.receivedAt ?? performance.now(),
    init.sink ?? new RecordingSink(),
    init.upstreamHeaders ?? {},
  );
}

/** A ServerProfile (defaults: vLLM, aggregated, no retry limit, the default stage budgets). */
export function serverProfile(overrides: Partial<ServerProfile> = {}): ServerProfile {
  const namespace = overrides.namespace ?? 'default';
  const name = overrides.name ?? 'server';
  return {
    kind: 'engine',
    engine: 'vLLM',
    mode: 'aggregated',
    connector: 'aggregated',
    retry: { retries: Number.MAX_SAFE_INTEGER, intervalMs: 0 },
    timeouts: DEFAULT_STAGE_TIMEOUTS,
    relayKvParams: false,
    ...overrides,
    namespace,
    name,
    key: `${namespace}/${name}`,
  };
}

interface RoutedInit extends RequestContextInit {
  readonly server?: ServerProfile;
  readonly route?: string;
  readonly upstreamModel?: string;
}

/** A request routed to `server` (default {@link serverProfile}). */
export function routedRequest(init: RoutedInit = {}): RequestContext & { readonly routing: EngineRouting } {
  const ctx: RequestContext = requestContext(init);
  const server = init.server ?? serverProfile();
  ctx.routed<EngineRouting>({
    route: init.route ?? `${server.namespace}/route`,
    namespace: server.namespace,
    serverName: server.name,
    lora: false,
    server,
    upstreamModel: init.upstreamModel ?? ctx.model,
  });
  return ctx;
}

interface ProxyInit extends RoutedInit {
  readonly decision: Decision;
  readonly local?: boolean;
  readonly injectUsage?: boolean;
  readonly clientWantsUsage?: boolean;
  /** Default: the body's media parts for an epd server, else none. */
  readonly media?: readonly MediaPart[];
  readonly dpRank?: DpRankPicker;
}

/** A request routed, scheduled with `decision` and prepared for the stage loop: what connectors get. */
export function proxyRequest(init: ProxyInit): EngineRequest {
  const ctx: RequestContext & { readonly routing: EngineRouting } = routedRequest(init);
  const server = ctx.routing.server;
  ctx.scheduled({ decision: init.decision, local: init.local ?? false, durationMs: 0 });
  ctx.prepared({
    decision: init.decision,
    attempts: init.decision.attempts,
    connector: server.connector,
    injectUsage: init.injectUsage ?? false,
    clientWantsUsage: init.clientWantsUsage ?? false,
    media: init.media ?? (server.mode === 'epd' ? extractMediaParts(ctx.body) : []),
    dpRank: init.dpRank,
  });
  return ctx;
}
