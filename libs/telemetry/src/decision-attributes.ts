import type { Attributes } from '@opentelemetry/api';
import type { DecisionOrError } from '@triad/bus';
import { ATTR, put } from './attributes';

/**
 * A scheduling decision as span attributes, the same on the gateway's `schedule` span and the scheduler's:
 * chosen endpoint per stage (keys, which name namespace, ModelServer and pod), failover depth, encoder choices
 * and how many of them came from cache affinity. An error decision gives its code.
 */
export function decisionAttributes(outcome: DecisionOrError, attrs: Attributes = {}): Attributes {
  if (!outcome.ok) {
    attrs[ATTR.decisionErrorCode] = outcome.code;
    return attrs;
  }
  const first = outcome.attempts[0];
  attrs[ATTR.mode] = outcome.mode;
  attrs[ATTR.decisionTopN] = outcome.attempts.length;
  if (first) {
    attrs[ATTR.decisionEndpoint] = first.endpoint.key;
    put(attrs, ATTR.decisionPrefill, first.prefill?.key);
  }
  if (outcome.attempts.length > 1) attrs[ATTR.decisionAlternates] = outcome.attempts.slice(1).map((a) => a.endpoint.key);
  if (outcome.encoders.length > 0) {
    attrs[ATTR.decisionEncoders] = outcome.encoders.map((e) => e.endpoint.key);
    attrs[ATTR.decisionEncoderAffinityHits] = outcome.encoders.filter((e) => e.affinity).length;
  }
  const split = outcome.disaggregation;
  if (split) {
    const skipped = [split.encode === 'local' ? 'encode' : '', split.prefill === 'local' ? 'prefill' : ''].filter((s) => s !== '');
    if (skipped.length > 0) attrs[ATTR.decisionSkippedStages] = skipped;
    attrs[ATTR.decisionDisaggregation] = split.reason;
  }
  put(attrs, ATTR.decisionDecidedBy, outcome.decidedBy);
  return attrs;
}
