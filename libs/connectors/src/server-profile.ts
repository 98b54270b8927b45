import type { ModelServerRecord } from '@triad/bus';
import {
  DEFAULT_MAX_ENCODER_BATCH,
  DEFAULT_REENCODE_ATTEMPTS,
  durationMs,
  isPushEcConnector,
  outlierPolicyOf,
  shortcutsOf,
  streamResumePolicyOf,
} from '@triad/crd';
import type { EcProfile, KvProfile, RetryPolicy, ServerProfile, StageTimeouts } from '@triad/request';
import { connectorFor, relaysKvParams } from './registry';

/**
 * `trafficPolicy.retry` as the stage loop applies it: `attempts` is the number of retries after the first try
 * (0 = none), each on the next alternate of the decision, after `retryInterval`. Without a retry policy every
 * alternate may be tried back to back (Kthena's aggregated behaviour, without its retry-after-bytes bug).
 */
export function retryPolicyOf(record: ModelServerRecord): RetryPolicy {
  const retry = record.spec.trafficPolicy?.retry;
  if (retry === undefined) return { retries: Number.MAX_SAFE_INTEGER, intervalMs: 0 };
  return { retries: retry.attempts ?? Number.MAX_SAFE_INTEGER, intervalMs: durationMs(retry.retryInterval, 100) };
}

/**
 * Stage budgets of one ModelServer: `trafficPolicy.timeout` bounds each stage (encode, prefill, and the final
 * leg up to its first byte) — Kthena applies it to "dial + upload + headers" of its single hop — while the
 * total budget stays the gateway's.
 */
export function stageTimeoutsOf(record: ModelServerRecord, defaults: StageTimeouts): StageTimeouts {
  const timeout = record.spec.trafficPolicy?.timeout;
  if (timeout === undefined) return defaults;
  const ms = durationMs(timeout, defaults.firstByteMs);
  return { encodeMs: ms, prefillMs: ms, firstByteMs: ms, totalMs: defaults.totalMs };
}

/** vLLM EPD's EC settings (`spec.ecConnector`, defaults for what it leaves out); undefined for other servers. */
export function ecProfileOf(record: ModelServerRecord): EcProfile | undefined {
  if (record.spec.inferenceEngine !== 'vLLM' || record.mode !== 'epd') return undefined;
  const ec = record.spec.ecConnector;
  const connector = ec?.type ?? 'shared-storage';
  return {
    connector,
    push: isPushEcConnector(connector),
    mmEmbeds: ec?.enableMmEmbeds ?? false,
    maxEncoderBatch: ec?.maxEncoderBatch ?? DEFAULT_MAX_ENCODER_BATCH,
    reencodeAttempts: ec?.reencodeAttempts ?? DEFAULT_REENCODE_ATTEMPTS,
  };
}

/**
 * vLLM P→D KV settings (`spec.kvConnector`): the type (NIXL for vLLM EPD without one, the connector of vLLM's own
 * E→P→D examples; plain `http` for PD without one, as Kthena does), the Mooncake implementation (`auto` unless the
 * ModelServer names it) and NIXL's transfer direction. Undefined for SGLang and aggregated servers.
 */
export function kvProfileOf(record: ModelServerRecord): KvProfile | undefined {
  const spec = record.spec;
  if (spec.inferenceEngine !== 'vLLM' || record.mode === 'aggregated') return undefined;
  const kv = spec.kvConnector;
  return {
    type: kv?.type ?? (record.mode === 'epd' ? 'nixl' : 'http'),
    mooncake: kv?.implementation ?? 'auto',
    push: kv?.type === 'nixl' && kv.transferMode === 'push',
  };
}

/**
 * Whether a vLLM server hands KV from prefill to decode by transfer parameters that name one engine request's
 * blocks (NIXL pull and push, both Mooncake connectors): a pd server, or an epd one with a prefill stage
 * (`prefillLabels` not empty; E→PD has none). LMCache finds KV by its tokens, plain `http` hands nothing over.
 */
function singlePromptKvHandoff(record: ModelServerRecord, kv: KvProfile | undefined): boolean {
  if (kv === undefined || (kv.type !== 'nixl' && kv.type !== 'mooncake')) return false;
  if (record.mode === 'pd') return true;
  const prefillLabels = record.spec.workloadSelector.pdGroup?.prefillLabels;
  return record.mode === 'epd' && prefillLabels !== undefined && Object.keys(prefillLabels).length > 0;
}

/** The stages a PD/EPD server's engines can do without; none for aggregated servers (nothing to skip). */
function shortcutsOfRecord(record: ModelServerRecord): { shortcuts?: ServerProfile['shortcuts'] } {
  if (record.mode === 'aggregated') return {};
  const { localEncode, skipPrefill } = shortcutsOf(record.spec, record.mode);
  return localEncode || skipPrefill ? { shortcuts: { localEncode, skipPrefill } } : {};
}

function ecOf(record: ModelServerRecord): { ec?: EcProfile } {
  const ec = ecProfileOf(record);
  return ec === undefined ? {} : { ec };
}

/** Everything the stage loop needs about a ModelServer, resolved once per KV update. */
export function serverProfileOf(record: ModelServerRecord, defaults: StageTimeouts): ServerProfile {
  const spec = record.spec;
  const kv = spec.kvConnector?.type;
  const kvProfile = kvProfileOf(record);
  const maxConnections = spec.connectionPool?.maxConnections;
  const streamResume = streamResumePolicyOf(spec);
  return {
    kind: 'engine',
    namespace: record.namespace,
    name: record.name,
    key: `${record.namespace}/${record.name}`,
    engine: spec.inferenceEngine,
    mode: record.mode,
    connector: connectorFor(spec.inferenceEngine, record.mode, kv, spec.kvConnector?.transferMode),
    retry: retryPolicyOf(record),
    timeouts: stageTimeoutsOf(record, defaults),
    relayKvParams: relaysKvParams(spec.inferenceEngine, record.mode, kv),
    ...(kvProfile !== undefined ? { kv: kvProfile } : {}),
    ...(singlePromptKvHandoff(record, kvProfile) ? { singlePromptKvHandoff: true } : {}),
    outlier: outlierPolicyOf(spec),
    ...ecOf(record),
    ...shortcutsOfRecord(record),
    ...(maxConnections === undefined ? {} : { maxConnections }),
    ...(spec.engineAuth?.passThrough === true ? { authPassThrough: true } : {}),
    ...(spec.engineAuth?.credential !== undefined ? { engineCredential: spec.engineAuth.credential } : {}),
    ...(spec.engineAuth?.secretRef !== undefined ? { engineSecretRef: spec.engineAuth.secretRef } : {}),
    ...(streamResume === undefined ? {} : { streamResume }),
  };
}
