import type { ExternalProviderRecord } from '@triad/bus';
import { BadRequestError, type IncomingHeaders } from '@triad/request';
import { chatToAnthropic } from './anthropic-translation';
import type { ProviderProtocol } from './provider-usage';

const CHAT = '/v1/chat/completions';
const COMPLETIONS = '/v1/completions';
const RESPONSES = '/v1/responses';
const MESSAGES = '/v1/messages';

/** Anthropic's API refuses requests without a version; clients of the OpenAI API never send one. */
export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/** Client headers a provider gets (Kthena's list): content negotiation and trace context, never credentials. */
const FORWARD = [
  'accept',
  'traceparent',
  'tracestate',
  'baggage',
  'x-b3-traceid',
  'x-b3-spanid',
  'x-b3-parentspanid',
  'x-b3-sampled',
  'x-b3-flags',
] as const;
const ANTHROPIC_FORWARD = ['anthropic-version', 'anthropic-beta'] as const;

/** One upstream request to a provider, ready to send (headers without the credential, added at send time). */
export interface ProviderCall {
  readonly origin: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly protocol: ProviderProtocol;
  /** An OpenAI chat request answered by an Anthropic provider: answers are translated back. */
  readonly translate: boolean;
  /** The model the provider is asked for. */
  readonly model: string;
  /** The gateway added `stream_options.include_usage` (OpenAI chat stream): the usage-only chunk is removed again. */
  readonly injectedUsage: boolean;
  /** The client asked for the usage chunk (translated streams end with one only then). */
  readonly clientWantsUsage: boolean;
}

/** Base URL path + request path as Kthena joins them (a base path that already names the version drops `/v1`). */
function upstreamPath(base: URL, requestPath: string, type: ExternalProviderRecord['spec']['providerType']): string {
  const basePath = base.pathname.replace(/\/+$/, '');
  const trim = type === 'Anthropic' ? basePath.endsWith('/v1') : basePath !== '';
  let suffix = requestPath.replace(/^\/+/, '');
  if (trim) suffix = suffix === 'v1' ? '' : suffix.replace(/^v1\//, '');
  return suffix === '' ? basePath || '/' : `${basePath}/${suffix}`;
}

/** The protocol a provider of `type` serves `path` with; 400 for paths it does not serve (as Kthena). */
export function providerProtocolOf(
  type: ExternalProviderRecord['spec']['providerType'],
  path: string,
): { protocol: ProviderProtocol; translate: boolean } {
  if (type === 'Anthropic') {
    if (path === MESSAGES) return { protocol: 'anthropic-messages', translate: false };
    if (path === CHAT) return { protocol: 'anthropic-messages', translate: true };
  } else if (path === CHAT || path === COMPLETIONS) return { protocol: 'openai-chat', translate: false };
  else if (path === RESPONSES) return { protocol: 'openai-responses', translate: false };
  const paths = type === 'Anthropic' ? `${MESSAGES} and ${CHAT}` : `${CHAT}, ${COMPLETIONS} and ${RESPONSES}`;
  throw new BadRequestError(`provider type ${type} does not support path ${path} (it serves ${paths})`);
}

function wantsUsage(body: Readonly<Record<string, unknown>>): boolean {
  const options = body['stream_options'];
  return options !== null && typeof options === 'object' && (options as Record<string, unknown>)['include_usage'] === true;
}

/**
 * Builds the provider request for a client request routed to an ExternalModelProvider: the URL from `baseURL`,
 * the body with `model` set (the provider's `spec.model`, else the route's model) and usage asked for on OpenAI
 * chat streams, the allowed client headers, then the static `headers`. OpenAI providers serve chat,
 * completions and responses as they are; Anthropic providers serve `/v1/messages` as it is and chat completions
 * translated. Other paths are refused with 400, as Kthena does.
 */
export function buildProviderCall(
  record: ExternalProviderRecord,
  path: string,
  body: Readonly<Record<string, unknown>>,
  requestModel: string,
  headers: IncomingHeaders,
  requestId: string,
): ProviderCall {
  const type = record.spec.providerType;
  const { protocol, translate } = providerProtocolOf(type, path);
  const model = record.spec.model || requestModel;
  const base = new URL(record.spec.baseURL);
  const stream = body['stream'] === true;
  const clientWantsUsage = wantsUsage(body);
  let upstream: Record<string, unknown>;
  let injectedUsage = false;
  if (translate) upstream = chatToAnthropic(body, model);
  else {
    upstream = { ...body, model };
    if (protocol === 'openai-chat' && stream && !clientWantsUsage) {
      const options = body['stream_options'];
      upstream['stream_options'] = { ...(options !== null && typeof options === 'object' ? options : {}), include_usage: true };
      injectedUsage = true;
    }
  }
  const out: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': requestId };
  const forward: readonly string[] = type === 'Anthropic' ? [...FORWARD, ...ANTHROPIC_FORWARD] : FORWARD;
  for (const name of forward) {
    const v = headers[name];
    if (typeof v === 'string') out[name] = v;
  }
  if (type === 'Anthropic' && out['anthropic-version'] === undefined) out['anthropic-version'] = DEFAULT_ANTHROPIC_VERSION;
  if (translate) out['accept'] = stream ? 'text/event-stream' : 'application/json';
  for (const [name, value] of Object.entries(record.spec.headers ?? {})) out[name.toLowerCase()] = value;
  return {
    origin: base.origin,
    path: upstreamPath(base, translate ? MESSAGES : path, type),
    headers: out,
    body: JSON.stringify(upstream),
    protocol,
    translate,
    model,
    injectedUsage,
    clientWantsUsage,
  };
}
