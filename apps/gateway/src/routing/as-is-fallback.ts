import type { ListenerRef } from '@triad/bus';
import { BadRequestError, echo, type RequestContext } from '@triad/request';
import type { KvView } from '../state/kv-view';
import { isInferencePath } from './inference-paths';
import type { RouteMatch } from './route-table';

function disaggregated(kv: KvView, namespace: string, server: string): boolean {
  const mode = kv.server(namespace, server)?.profile.mode;
  return mode !== undefined && mode !== 'aggregated';
}

/**
 * Other `/v1/*` calls carry no bootstrap room, so a PD server would refuse them (400): when the rule picked a
 * disaggregated ModelServer for one, resolution runs again keeping only targets that serve it as it is (an
 * aggregated ModelServer of the same rule, or a provider), else the gateway says why.
 */
export function servedAsIs(kv: KvView, ctx: RequestContext, match: RouteMatch, listener: ListenerRef | undefined): RouteMatch {
  if (isInferencePath(ctx.path) || match.provider !== undefined || !disaggregated(kv, match.namespace, match.modelServer)) return match;
  const asIs = (ns: string, name: string | undefined, provider: string | undefined) =>
    provider !== undefined || (name !== undefined && kv.server(ns, name) !== undefined && !disaggregated(kv, ns, name));
  const found = kv.routes.resolve(ctx, asIs, listener);
  if (found === undefined) {
    throw new BadRequestError(
      `${echo(ctx.path)} is not served for model '${echo(ctx.model)}': its ModelServers run disaggregated (prefill/decode), ` +
        'where only /v1/chat/completions, /v1/completions and /generate are routed, and no aggregated ModelServer serves it',
      null,
    );
  }
  return found;
}
