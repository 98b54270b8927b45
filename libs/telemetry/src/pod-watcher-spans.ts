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

/** What an encoder-registry pass is about: one SGLang EPD prefill server's registry. */
export interface EncoderRegistryInfo {
  /** Base URL of the prefill server whose registry is reconciled. */
  readonly prefillUrl: string;
  readonly namespace?: string;
  readonly modelServer?: string;
  readonly endpointKey?: string;
}

/** An SGLang EPD encoder-registry pass (list, register, unregister) as the root of its own trace. */
export function startEncoderRegistrySpan(info: EncoderRegistryInfo): Traced {
  return startTraced('encoder-registry', { root: true }, () => {
    const attrs: Attributes = { [ATTR.encoderRegistryPrefill]: info.prefillUrl };
    put(attrs, ATTR.namespace, info.namespace);
    put(attrs, ATTR.modelServer, info.modelServer);
    put(attrs, ATTR.endpointKey, info.endpointKey);
    return attrs;
  });
}

export interface EncoderRegistryResult {
  readonly registered?: readonly string[];
  readonly unregistered?: readonly string[];
  /** Encoders the registry should hold after the pass. */
  readonly encoders?: number;
  readonly error?: unknown;
}

/** Ends the pass with what changed: `add`, `remove`, `update` (both) or `none`. */
export function finishEncoderRegistrySpan(t: Traced, result: EncoderRegistryResult): void {
  const span = t.span;
  if (span.isRecording()) {
    const added = result.registered?.length ?? 0;
    const removed = result.unregistered?.length ?? 0;
    const attrs: Attributes = {
      [ATTR.encoderRegistryChange]: added && removed ? 'update' : added ? 'add' : removed ? 'remove' : 'none',
    };
    if (added) attrs[ATTR.encoderRegistryRegistered] = [...(result.registered ?? [])];
    if (removed) attrs[ATTR.encoderRegistryUnregistered] = [...(result.unregistered ?? [])];
    put(attrs, ATTR.encoderRegistryEncoders, result.encoders);
    span.setAttributes(attrs);
    if (result.error !== undefined) recordFailure(t, result.error);
  }
  span.end();
}
