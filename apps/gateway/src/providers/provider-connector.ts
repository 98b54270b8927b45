import type { Attempt, EndpointRef, ExternalProviderRecord } from '@triad/bus';
import type { Connector, LegRunner, RemoteOrigin } from '@triad/connectors';
import { isTriadError } from '@triad/errors';
import {
  RequestLocal,
  clientMessageOf,
  writeStreamError,
  type ProviderConnectorName,
  type ProviderRequest,
  type ProviderRouting,
  type RequestContext,
} from '@triad/request';
import { buildProviderCall, type ProviderCall } from './provider-call';
import type { ResolvedProvider } from './provider-directory';
import { ProviderAnswers, scrub } from './provider-answers';

/** One request's provider call, built once before its tries. */
interface PlannedCall {
  readonly call: ProviderCall;
  readonly origin: RemoteOrigin;
  /** The call's headers with the credential (never logged). */
  readonly headers: Readonly<Record<string, string>>;
  readonly secret: string | undefined;
}

const CALL = new RequestLocal<PlannedCall>('provider.call');

/** The endpoint a provider's calls are recorded against (span `server.address`, access-log `endpoints`). */
function endpointOf(record: ExternalProviderRecord): EndpointRef {
  const url = new URL(record.spec.baseURL);
  return { key: `${record.namespace}.${record.name}`, pod: record.name, ip: url.hostname, port: Number(url.port || 443) };
}

/**
 * Builds the provider call of a request routed to `provider` (the body translated when its API differs) and
 * prepares the request for the stage loop: the provider's endpoint once per try the gateway's settings allow.
 */
export function prepareProviderRequest(
  ctx: RequestContext & { readonly routing: ProviderRouting },
  provider: ResolvedProvider,
): ProviderRequest {
  const record = provider.record;
  const call = buildProviderCall(record, ctx.path, ctx.body, ctx.model, ctx.headers, ctx.id);
  const headers = provider.auth === undefined ? call.headers : { ...call.headers, [provider.auth[0]]: provider.auth[1] };
  const origin = { url: new URL(record.spec.baseURL).origin, verifyTls: !record.spec.insecureSkipVerify };
  CALL.set(ctx, { call, origin, headers, secret: provider.secret });
  const server = ctx.routing.server;
  const attempt: Attempt = { endpoint: endpointOf(record) };
  ctx.prepared({
    connector: server.connector,
    attempts: Array.from({ length: 1 + server.retry.retries }, () => attempt),
    injectUsage: call.injectedUsage,
    clientWantsUsage: call.clientWantsUsage,
  });
  return ctx;
}

/**
 * An ExternalModelProvider's API as a connector (`external-openai`, `external-anthropic`): one relay leg per try
 * to the provider's HTTPS origin, with the sealed credential and the spec's static headers; its answers go
 * through {@link ProviderAnswers}. Retries, timeouts, the client's departure and error answers before the first
 * byte are the stage loop's, as for engines.
 */
export class ProviderConnector implements Connector<ProviderRequest> {
  readonly name: ProviderConnectorName;

  constructor(name: ProviderConnectorName) {
    this.name = name;
  }

  async attempt(ctx: ProviderRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    const planned = plannedCall(ctx);
    const answers = new ProviderAnswers(planned.call, planned.secret, attempt.endpoint.key, index + 1 >= ctx.proxy.attempts.length);
    try {
      await run.relay({
        stage: 'aggregated',
        endpoint: attempt.endpoint,
        item: -1,
        attempt: index,
        body: planned.call.body,
        requestId: ctx.id,
        timeoutMs: ctx.routing.server.timeouts.firstByteMs,
        path: planned.call.path,
        headers: planned.headers,
        origin: planned.origin,
        answer: answers,
      }).promise;
    } catch (err) {
      // The provider's error answer went to the client as it was: the request failed, the answer is complete.
      if (err !== answers.passedThrough || answers.passedThrough === undefined) throw err;
      ctx.result.error = answers.passedThrough;
    }
  }

  /** A Messages stream the client reads as it is ends with Anthropic's error event; others with OpenAI's. */
  writeStreamError(ctx: ProviderRequest, error: Error): void {
    const planned = CALL.get(ctx);
    if (planned === undefined || planned.call.protocol !== 'anthropic-messages' || planned.call.translate) {
      writeStreamError(ctx.sink, error);
      return;
    }
    const message = scrub(isTriadError(error) ? clientMessageOf(error, ctx) : 'internal error', planned.secret);
    if (!ctx.sink.destroyed && !ctx.sink.writableEnded) {
      ctx.sink.end(`event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'api_error', message } })}\n\n`);
    }
  }
}

function plannedCall(ctx: ProviderRequest): PlannedCall {
  const planned = CALL.get(ctx);
  if (planned === undefined) throw new Error(`provider request ${ctx.id} reached its connector without a call (a bug)`);
  return planned;
}
