import { EcHandoffError, type RequestContext } from '@triad/request';
import type { Logger } from '@triad/runtime';
import type { GatewayMetrics } from './metrics';

/**
 * Counts and logs an encoder-cache hand-off failure (vLLM EPD): one `triad_gateway_ec_handoff_failures_total`
 * increment by reason and one warn line naming the request, stage, item and pod. Called for the failures a connector
 * recovered from (a re-encode, another attempt) and for the one that ended a request; other errors are ignored.
 */
export function recordEcHandoff(metrics: GatewayMetrics, logger: Logger | undefined, ctx: RequestContext, err: unknown): void {
  if (!(err instanceof EcHandoffError)) return;
  metrics.ecHandoffFailure(err.reason);
  logger?.warn(
    {
      requestId: ctx.id,
      model: ctx.model,
      reason: err.reason,
      stage: err.stage,
      item: err.item >= 0 ? err.item : undefined,
      endpoint: err.endpoint,
      err: err.message,
    },
    'EC hand-off failed',
  );
}
