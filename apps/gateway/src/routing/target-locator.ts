import type { ListenerRef } from '@triad/bus';
import { NotFoundError, PathNotFoundError, echo, type RequestContext } from '@triad/request';
import type { GatewayApiView } from '../gateway-api/gateway-api-view';
import type { ProviderDirectory } from '../providers/provider-directory';
import type { KvView } from '../state/kv-view';
import { servedAsIs } from './as-is-fallback';
import { engineTarget } from './engine-target';
import { matchHttpRoute } from './http-route-fallback';
import { providerTarget, type ProviderSettings } from './provider-target';
import type { Target } from './target';

export interface TargetLocatorDeps {
  readonly kv: KvView;
  readonly providers: ProviderDirectory;
  readonly providerSettings: ProviderSettings;
  /** Gateway API records (listeners, HTTPRoutes), in Gateway API mode. */
  readonly gatewayApi?: GatewayApiView | undefined;
}

/**
 * Resolves a request to its {@link Target}: ModelRoute rules first (on a Gateway listener only for `/v1/`
 * paths), then the listener's HTTPRoutes for what they left, then — for calls a disaggregated ModelServer cannot
 * serve — an aggregated target of the same rule. Throws the request error that says why nothing serves it.
 */
export class TargetLocator {
  readonly #d: TargetLocatorDeps;

  constructor(deps: TargetLocatorDeps) {
    this.#d = deps;
  }

  /** `listener`: the Gateway listener the request arrived at (Gateway API mode), else undefined. */
  locate(ctx: RequestContext, listener: ListenerRef | undefined): Target {
    const d = this.#d;
    const modelRouted = listener === undefined || ctx.path.startsWith('/v1/');
    const match = modelRouted ? d.kv.routes.resolve(ctx, undefined, listener) : undefined;
    if (match === undefined) {
      const http = listener !== undefined && d.gatewayApi !== undefined ? matchHttpRoute(d.gatewayApi, listener, ctx) : undefined;
      if (http !== undefined) return engineTarget(d.kv, ctx, http.match, http.upstreamPath, http.host);
      // Off `/v1/` only HTTPRoutes route (by path): none matching is a path without a route, whatever the model.
      if (!modelRouted) {
        const message = `There is no route for ${ctx.method} ${echo(ctx.path)}: no HTTPRoute of this listener matches it`;
        throw new PathNotFoundError(ctx.method, ctx.path, message);
      }
      const what = listener ? 'ModelRoute or HTTPRoute' : 'ModelRoute';
      throw new NotFoundError(`The model '${echo(ctx.model)}' does not exist (no ${what} matches it)`, 'model');
    }
    const served = servedAsIs(d.kv, ctx, match, listener);
    const provider = served.provider;
    if (provider !== undefined) return providerTarget(d.providers, d.providerSettings, ctx, { ...served, provider });
    return engineTarget(d.kv, ctx, served, undefined, undefined);
  }
}
