import type { ExternalProviderRecord } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { NotFoundError, RequestError, type ProviderProfile, type RequestContext } from '@triad/request';
import { providerProtocolOf } from '../providers/provider-call';
import { isResolved, type ProviderDirectory } from '../providers/provider-directory';
import type { RouteMatch } from './route-table';
import type { ProviderTarget } from './target';

/** The gateway's settings for every provider call (`--provider-*`, and the gateway's stage budgets). */
export interface ProviderSettings {
  /** Tries after the first on a transport failure, a timeout or a 502/503/504 answer, before any byte went out. */
  readonly retries: number;
  readonly retryIntervalMs: number;
  /** From sending the request to the provider's first answer byte; 0 disables. */
  readonly firstByteTimeoutMs: number;
  /** The whole request, from arrival to the last byte; 0 disables. */
  readonly totalTimeoutMs: number;
}

/** A provider's profile: metrics and logs name it `namespace/provider`; its API picks the connector. */
function providerProfileOf(record: ExternalProviderRecord, settings: ProviderSettings): ProviderProfile {
  const api = record.spec.providerType;
  return {
    kind: 'provider',
    namespace: record.namespace,
    name: record.name,
    key: `${record.namespace}/${record.name}`,
    api,
    mode: 'aggregated',
    connector: api === 'Anthropic' ? 'external-anthropic' : 'external-openai',
    retry: { retries: settings.retries, intervalMs: settings.retryIntervalMs },
    timeouts: { encodeMs: 0, prefillMs: 0, firstByteMs: settings.firstByteTimeoutMs, totalMs: settings.totalTimeoutMs },
  };
}

/**
 * The ExternalModelProvider a match names, with its credential opened: 404 when there is none, 503 when it is not
 * ready or its credential is not available, 400 when its API does not serve the request path. It gets its
 * `spec.model`, else the request's model.
 */
export function providerTarget(
  directory: ProviderDirectory,
  settings: ProviderSettings,
  ctx: RequestContext,
  match: RouteMatch & { readonly provider: string },
): ProviderTarget {
  const resolved = directory.resolve(match.namespace, match.provider);
  if (!isResolved(resolved)) {
    if (!resolved.found) throw new NotFoundError(resolved.message, 'model');
    throw new RequestError(ErrorCode.ProviderUnavailable, resolved.message);
  }
  const record = resolved.record;
  providerProtocolOf(record.spec.providerType, ctx.path);
  return {
    kind: 'provider',
    routing: {
      route: match.route,
      namespace: match.namespace,
      serverName: record.name,
      lora: false,
      server: providerProfileOf(record, settings),
      upstreamModel: record.spec.model || ctx.model,
    },
    provider: resolved,
  };
}
