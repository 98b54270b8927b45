import type { Attributes } from '@opentelemetry/api';
import { ATTR, put } from './attributes';
import { recordFailure, startTraced, type Traced } from './spans';

/**
 * Pod-watcher work is not caused by a request, so each pass is the root of its own trace: the trace answers
 * "what did this reconcile write, and how long did it take".
 */
export function startReconcileSpan(info: { readonly source: string; readonly trigger?: string; readonly namespace?: string }): Traced {
  return startTraced('reconcile', { root: true }, () => {
    const attrs: Attributes = { [ATTR.reconcileSource]: info.source };
    put(attrs, ATTR.reconcileTrigger, info.trigger);
    put(attrs, ATTR.namespace, info.namespace);
    return attrs;
  });
}

export interface ReconcileResult {
  /** Endpoint records in the desired state after the pass. */
  readonly endpoints?: number;
  /** KV keys written (changed records only). */
  readonly written?: number;
  readonly deleted?: number;
  /** Specs rejected by validation in this pass (their last valid record stays). */
  readonly invalidSpecs?: number;
  readonly error?: unknown;
}

export function finishReconcileSpan(t: Traced, result: ReconcileResult): void {
  const span = t.span;
  if (span.isRecording()) {
    const attrs: Attributes = {};
    put(attrs, ATTR.reconcileEndpoints, result.endpoints);
    put(attrs, ATTR.reconcileWritten, result.written);
    put(attrs, ATTR.reconcileDeleted, result.deleted);
    put(attrs, ATTR.reconcileInvalid, result.invalidSpecs);
    span.setAttributes(attrs);
    if (result.error !== undefined) recordFailure(t, result.error);
  }
  span.end();
}

/** A change to an SGLang EPD encoder registry (own trace); end it with `endTraced(t, err?)`. */
export function startEncoderRegistrySpan(info: {
  readonly namespace: string;
  readonly modelServer: string;
  /** `add`, `remove` or `update`. */
  readonly change: string;
  /** Encoders registered after the change. */
  readonly encoders: number;
  readonly endpointKey?: string;
}): Traced {
  return startTraced('encoder-registry', { root: true }, () => {
    const attrs: Attributes = {
      [ATTR.namespace]: info.namespace,
      [ATTR.modelServer]: info.modelServer,
      [ATTR.encoderRegistryChange]: info.change,
      [ATTR.encoderRegistryEncoders]: info.encoders,
    };
    put(attrs, ATTR.endpointKey, info.endpointKey);
    return attrs;
  });
}
