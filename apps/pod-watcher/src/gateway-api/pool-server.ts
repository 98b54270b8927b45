import { inferencePoolServerName } from '@triad/bus';
import { API_VERSION, INFERENCE_ENGINE_ANNOTATION, type InferencePool, type ModelServer } from '@triad/crd';

/**
 * An InferencePool as the aggregated ModelServer its pods are published under (`inferencePoolServerName`):
 * the pool's selector and first target port, the engine from the `triad.io/inference-engine` annotation
 * (vLLM by default), so classification, scraping and the scheduler's plugins treat its pods like any others.
 */
export function poolModelServer(pool: InferencePool): ModelServer {
  const engine = pool.metadata.annotations?.[INFERENCE_ENGINE_ANNOTATION] === 'SGLang' ? 'SGLang' : 'vLLM';
  const created = pool.metadata.creationTimestamp;
  return {
    apiVersion: API_VERSION,
    kind: 'ModelServer',
    metadata: {
      name: inferencePoolServerName(pool.metadata.name),
      namespace: pool.metadata.namespace,
      ...(created ? { creationTimestamp: created } : {}),
    },
    spec: {
      inferenceEngine: engine,
      workloadSelector: { matchLabels: pool.spec.selector.matchLabels },
      workloadPort: { port: pool.spec.targetPorts[0].number, protocol: 'http' },
    },
  };
}
