import { PluginRegistry } from '../framework/registry';
import { KvBlockIndex } from '../state/kv-block-index';
import type { KeyAgreement } from '../state/key-agreement';
import { encoderAffinityPlugin } from './encoder-affinity/encoder-affinity';
import { encoderCachePlugin } from './encoder-cache/encoder-cache';
import { gpuUsagePlugin } from './gpu-usage/gpu-usage';
import { kvPressurePlugin } from './kv-pressure/kv-pressure';
import { leastLatencyPlugin } from './least-latency/least-latency';
import { leastRequestPlugin } from './least-request/least-request';
import { loraAffinityPlugin } from './lora-affinity/lora-affinity';
import { maxScorePlugin } from './max-score/max-score';
import { observedLatencyPlugin } from './observed-latency/observed-latency';
import { prefillBacklogPlugin } from './prefill-backlog/prefill-backlog';
import { precisePrefixCachePlugins } from './precise-prefix-cache/precise-prefix-cache';
import { prefixCachePlugin } from './prefix-cache/prefix-cache';
import { randomPlugin } from './random/random';
import { sessionAffinityPlugin } from './session-affinity/session-affinity';
import { staleMetricsPlugin } from './stale-metrics/stale-metrics';

/** State some in-tree plugins read, fed by the process that owns the registry. */
interface InTreePluginState {
  /** Engines' KV blocks (from the indexer's NATS feed) for `precise-prefix-cache`; empty when not given. */
  readonly kvIndex?: KvBlockIndex;
  /** Where `precise-prefix-cache` reports how many of a request's block keys the engines hold. */
  readonly keyAgreement?: KeyAgreement;
}

/** Registers every in-tree plugin type: the one list of what ships with Triad. */
export function registerInTreePlugins(registry: PluginRegistry, state: InTreePluginState = {}): PluginRegistry {
  registry
    .register(leastRequestPlugin)
    .register(gpuUsagePlugin)
    .register(leastLatencyPlugin)
    .register(observedLatencyPlugin)
    .register(prefillBacklogPlugin)
    .register(prefixCachePlugin)
    .register(loraAffinityPlugin)
    .register(randomPlugin)
    .register(staleMetricsPlugin)
    .register(kvPressurePlugin)
    .register(maxScorePlugin)
    .register(encoderAffinityPlugin)
    .register(encoderCachePlugin)
    .register(sessionAffinityPlugin);
  for (const def of precisePrefixCachePlugins(state.kvIndex ?? new KvBlockIndex(), state.keyAgreement)) registry.register(def);
  return registry;
}

/** A fresh registry holding the in-tree plugins (add out-of-tree ones with `register` before loading a config). */
export function createInTreeRegistry(state: InTreePluginState = {}): PluginRegistry {
  return registerInTreePlugins(new PluginRegistry(), state);
}
