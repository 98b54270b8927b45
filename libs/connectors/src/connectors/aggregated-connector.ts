import type { ProxyRequest } from '@triad/request';
import { finalLegBody } from '../request-bodies';
import type { Attempt, Connector, LegRunner } from '../types';

/** One hop: the request (with usage injection) to the chosen endpoint, its answer relayed to the client. */
export class AggregatedConnector implements Connector {
  readonly name = 'aggregated' as const;

  attempt(ctx: ProxyRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    return run.relay({
      stage: 'aggregated',
      endpoint: attempt.endpoint,
      item: -1,
      attempt: index,
      body: finalLegBody(ctx.body, ctx.proxy.injectUsage),
      requestId: ctx.id,
      timeoutMs: ctx.routing.server.timeouts.firstByteMs,
      ...(ctx.routing.upstreamPath !== undefined ? { path: ctx.routing.upstreamPath } : {}),
    }).promise;
  }
}
