/** A route to the aggregated server, and what else its spec holds (YAML flow mapping entries, e.g. a rateLimit). */
export interface ManifestRoute {
  readonly modelName: string;
  readonly extraSpec?: string;
}

export interface AggregatedManifestsSpec {
  /** The ModelServer's name, also its pods' `app` label and name prefix. */
  readonly server: string;
  /** The model the engines serve. */
  readonly model: string;
  /** The engines' port. */
  readonly port: number;
  /** One Running, Ready pod per address (`<server>-0`, `<server>-1`, …). */
  readonly podIps: readonly string[];
  /** A ModelRoute per entry, each to this server alone. */
  readonly routes: readonly ManifestRoute[];
}

/**
 * The manifests file `triad pod-watcher --source file:` reads for one aggregated vLLM ModelServer, its ModelRoutes
 * and its pods, as a cluster would serve them (multi-document YAML).
 */
export function aggregatedManifests(spec: AggregatedManifestsSpec): string {
  const docs = [
    `apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: ${spec.server}, namespace: default}
spec: {model: ${spec.model}, inferenceEngine: vLLM, workloadPort: {port: ${spec.port}}, workloadSelector: {matchLabels: {app: ${spec.server}}}}`,
    ...spec.routes.map(
      (route) => `apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelRoute
metadata: {name: ${route.modelName}, namespace: default}
spec: {modelName: ${route.modelName}, ${route.extraSpec ? `${route.extraSpec}, ` : ''}rules: [{targetModels: [{modelServerName: ${spec.server}}]}]}`,
    ),
    ...spec.podIps.map(
      (ip, i) => `apiVersion: v1
kind: Pod
metadata: {name: ${spec.server}-${i}, namespace: default, labels: {app: ${spec.server}}}
status: {phase: Running, podIP: ${ip}, conditions: [{type: Ready, status: "True"}]}`,
    ),
  ];
  return `${docs.join('\n---\n')}\n`;
}
