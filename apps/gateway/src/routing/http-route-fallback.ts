import type { ListenerRef } from '@triad/bus';
import { ErrorCode } from '@triad/errors';
import { RequestError, type RequestContext } from '@triad/request';
import type { GatewayApiView } from '../gateway-api/gateway-api-view';
import type { RouteMatch } from './route-table';

/** An HTTPRoute's pick: its InferencePool's ModelServer, with the rule's URLRewrite. */
export interface HttpRouteTarget {
  readonly match: RouteMatch;
  /** The path the engine gets (undefined: the request's). */
  readonly upstreamPath: string | undefined;
  /** The Host the engine gets (undefined: the client's). */
  readonly host: string | undefined;
}

function headerOf(headers: RequestContext['headers'], name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Gateway API mode: the HTTPRoute of `listener` that matches the request's host and path, for what ModelRoutes
 * left (Kthena's order). A matching rule without a backend to send to is the route's fault: 500, said so.
 */
export function matchHttpRoute(view: GatewayApiView, listener: ListenerRef, ctx: RequestContext): HttpRouteTarget | undefined {
  const http = view.match(listener, headerOf(ctx.headers, 'host'), ctx.path);
  if (http === undefined) return undefined;
  if (http.backend === undefined) {
    throw new RequestError(ErrorCode.Internal, `HTTPRoute ${http.route} matched but its rule has no InferencePool backend to send to`);
  }
  return {
    match: {
      route: http.route,
      namespace: http.backend.namespace,
      modelServer: http.backend.modelServer,
      provider: undefined,
      lora: false,
      rule: String(http.rule),
    },
    upstreamPath: http.path,
    host: http.hostname,
  };
}
