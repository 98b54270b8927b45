import { finalLegBody } from '../request-bodies';
import type { Attempt, Connector, LegRunner, ProxyCall } from '../types';

/** One hop: the request (with usage injection) to the chosen endpoint, its answer relayed to the client. */
export class AggregatedConnector implements Connector {
  readonly name = 'aggregated' as const;

  attempt(call: ProxyCall, attempt: Attempt, index: number, run: LegRunner): Promise<void> {
    return run.relay({
      stage: 'aggregated',
      endpoint: attempt.endpoint,
      item: -1,
      attempt: index,
      body: finalLegBody(call.body, call.injectUsage),
      requestId: call.id,
      timeoutMs: call.server.timeouts.firstByteMs,
    }).promise;
  }
}
