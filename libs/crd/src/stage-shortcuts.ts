import type { ModelServerSpec, PipelineMode } from './model-server';

/** What the engines of a ModelServer can serve without one of the stages its mode names. */
export interface Shortcuts {
  /** The EC consumer encodes media it was not handed (vLLM EPD, EC connector shared-storage or NIXL). */
  readonly localEncode: boolean;
  /** A decode pod serves a request with no remote prefill (vLLM whose KV connector relays kv_transfer_params). */
  readonly skipPrefill: boolean;
  /** Why a shortcut is unavailable, for explanations and error messages. */
  readonly why: string;
}

/**
 * The shortcuts a ModelServer's engines support (docs/reliability.md, *Stage fallback*, cites the engine code).
 * vLLM: an EC consumer whose connector finds no entry for an item encodes it locally (shared storage: a missing
 * file; NIXL: a missing announcement), but a Mooncake consumer waits for a push that never comes; a decode pod whose
 * KV connector reads `kv_transfer_params` (NIXL, Mooncake, LMCache; EPD without kvConnector uses NIXL) runs a local
 * prefill when they are absent, while the plain `http` connector gives no such guarantee. SGLang: a
 * `--disaggregation-mode decode` server cannot prefill, and the language-only prefill calls the encoders registered
 * with it, so neither shortcut exists. Used by the scheduler (per-request disaggregation, a stage with no usable
 * endpoint) and by the connectors (a stage whose every try failed), so both agree. `mode` is the resolved pipeline
 * mode (`resolvePipelineMode`).
 */
export function shortcutsOf(spec: Pick<ModelServerSpec, 'inferenceEngine' | 'kvConnector' | 'ecConnector'>, mode: PipelineMode): Shortcuts {
  if (spec.inferenceEngine !== 'vLLM') {
    return {
      localEncode: false,
      skipPrefill: false,
      why: `${spec.inferenceEngine} decode-only servers cannot prefill and its prefill calls its own encoders`,
    };
  }
  const kv = spec.kvConnector?.type;
  const relaysKv = kv === undefined ? mode === 'epd' : kv !== 'http';
  const ec = spec.ecConnector?.type ?? 'shared-storage';
  const localEncode = mode === 'epd' && ec !== 'mooncake';
  const why = [
    relaysKv ? '' : `KV connector '${kv ?? 'http'}' does not say when a decode pod must prefill itself`,
    mode === 'epd' && !localEncode ? 'a Mooncake EC consumer waits for pushes and never encodes itself' : '',
  ]
    .filter((s) => s !== '')
    .join('; ');
  return { localEncode, skipPrefill: relaysKv, why };
}
