import { API_VERSION, PROVIDER_SECRET_LABEL_KEY, PROVIDER_SECRET_LABEL_VALUE } from '@triad/crd';

/** Test builders for the objects a source delivers (the shapes of a cluster's objects, docs/pod-watcher.md). */
export interface PodOptions {
  readonly namespace?: string;
  readonly ip?: string;
  readonly ready?: boolean;
  readonly annotations?: Record<string, string>;
}

export function pod(name: string, labels: Record<string, string>, opts: PodOptions = {}) {
  const ready = opts.ready ?? true;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: opts.namespace ?? 'default', labels, ...(opts.annotations ? { annotations: opts.annotations } : {}) },
    status: { phase: 'Running', podIP: opts.ip ?? '127.0.0.1', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

export interface ServerOptions {
  readonly namespace?: string;
  readonly engine?: 'vLLM' | 'SGLang';
  readonly mode?: 'aggregated' | 'pd' | 'epd';
  readonly matchLabels?: Record<string, string>;
  readonly port?: number;
  readonly ports?: { encodePort?: number; prefillPort?: number; decodePort?: number };
  readonly bootstrapPort?: number;
  readonly kvConnector?: Record<string, unknown>;
}

/** A ModelServer; `pd` and `epd` get a pdGroup keyed on `group` with `role: encode|prefill|decode` labels. */
export function modelServer(name: string, opts: ServerOptions = {}) {
  const mode = opts.mode ?? 'pd';
  const pdGroup =
    mode === 'aggregated'
      ? undefined
      : {
          groupKey: 'group',
          ...(mode === 'epd' ? { encodeLabels: { role: 'encode' } } : {}),
          prefillLabels: { role: 'prefill' },
          decodeLabels: { role: 'decode' },
        };
  return {
    apiVersion: API_VERSION,
    kind: 'ModelServer',
    metadata: { name, namespace: opts.namespace ?? 'default' },
    spec: {
      model: 'sim-model',
      inferenceEngine: opts.engine ?? 'vLLM',
      pipelineMode: mode,
      workloadPort: { port: opts.port ?? 8000, ...(opts.ports ?? {}) },
      workloadSelector: { matchLabels: opts.matchLabels ?? { app: name }, ...(pdGroup ? { pdGroup } : {}) },
      ...(opts.bootstrapPort ? { bootstrapPort: opts.bootstrapPort } : {}),
      ...(opts.kvConnector ? { kvConnector: opts.kvConnector } : {}),
    },
  };
}

export function modelRoute(name: string, modelServerName: string, namespace = 'default') {
  return {
    apiVersion: API_VERSION,
    kind: 'ModelRoute',
    metadata: { name, namespace },
    spec: { modelName: name, rules: [{ targetModels: [{ modelServerName }] }] },
  };
}

export interface SecretOptions {
  readonly namespace?: string;
  /** Default: the credential label providers and engine credentials are read by; `{}` for a Secret the watcher never sees. */
  readonly labels?: Record<string, string>;
}

/** A Secret of `data` (plain values, base64-encoded here), in namespace `llm` unless told. */
export function credentialSecret(name: string, data: Record<string, string>, opts: SecretOptions = {}) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: opts.namespace ?? 'llm',
      labels: opts.labels ?? { [PROVIDER_SECRET_LABEL_KEY]: PROVIDER_SECRET_LABEL_VALUE },
    },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  };
}
