import type { EngineRequest } from '@triad/request';
import { clientPinsDpRank, finalLegBody } from '../request-bodies';
import type { Attempt, Connector, LegRunner } from '../types';

/**
 * One hop: the request (with usage injection) to the chosen endpoint, its answer relayed to the client. An SGLang
 * engine with DP ranks gets `routed_dp_rank` from the gateway's rank picker unless the client pinned one.
 */
export class AggregatedConnector implements Connector<EngineRequest> {
  readonly name = 'aggregated' as const;

  attempt(ctx: EngineRequest, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    const pick = ctx.proxy.dpRank;
    const rank = pick !== undefined && !clientPinsDpRank(ctx.body, ctx.headers) ? pick(attempt.endpoint, 'aggregated') : undefined;
    return run.relay({
      stage: 'aggregated',
      endpoint: attempt.endpoint,
      item: -1,
      attempt: index,
      body: finalLegBody(run.legBody(ctx.body), ctx.proxy.injectUsage, undefined, rank),
      requestId: ctx.id,
      timeoutMs: ctx.routing.server.timeouts.firstByteMs,
      ...(ctx.routing.upstreamPath !== undefined ? { path: ctx.routing.upstreamPath } : {}),
    }).promise;
  }
}
