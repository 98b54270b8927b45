import { PluginRegistry } from '../framework/registry';
import { encoderAffinityPlugin } from './encoder-affinity/encoder-affinity';
import { gpuUsagePlugin } from './gpu-usage/gpu-usage';
import { kvPressurePlugin } from './kv-pressure/kv-pressure';
import { leastLatencyPlugin } from './least-latency/least-latency';
import { leastRequestPlugin } from './least-request/least-request';
import { loraAffinityPlugin } from './lora-affinity/lora-affinity';
import { maxScorePlugin } from './max-score/max-score';
import { prefixCachePlugin } from './prefix-cache/prefix-cache';
import { randomPlugin } from './random/random';
import { staleMetricsPlugin } from './stale-metrics/stale-metrics';

/** Registers every in-tree plugin type: the one list of what ships with Triad. */
export function registerInTreePlugins(registry: PluginRegistry): PluginRegistry {
  return registry
    .register(leastRequestPlugin)
    .register(gpuUsagePlugin)
    .register(leastLatencyPlugin)
    .register(prefixCachePlugin)
    .register(loraAffinityPlugin)
    .register(randomPlugin)
    .register(staleMetricsPlugin)
    .register(kvPressurePlugin)
    .register(maxScorePlugin)
    .register(encoderAffinityPlugin);
}

/** A fresh registry holding the in-tree plugins (add out-of-tree ones with `register` before loading a config). */
export function createInTreeRegistry(): PluginRegistry {
  return registerInTreePlugins(new PluginRegistry());
}
