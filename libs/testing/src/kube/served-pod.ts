export interface ServedPodOptions {
  readonly namespace?: string;
  readonly labels: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly ip: string;
  readonly ready?: boolean;
  /** Container port of the engine (default 8000). */
  readonly port?: number;
}

/**
 * A pod of a vLLM Deployment as the API server serves it: owner reference, managed fields, a container with its
 * args, env, ports, probes, resources and mounts, volumes, and a status with conditions and container statuses
 * (about 4.4 KB of JSON). What an informer lists and watches in a real cluster, where a test pod with labels and
 * an IP alone would hide the cost of keeping pods.
 */
export function servedPod(name: string, opts: ServedPodOptions) {
  const namespace = opts.namespace ?? 'default';
  const port = opts.port ?? 8000;
  const ready = opts.ready ?? true;
  const at = '2026-11-30T08:00:00Z';
  const replicaSet = `${name.replace(/-[^-]*$/, '')}-7d9f8c6b5`;
  const uid = (seed: string) => {
    let h = 0x811c9dc5;
    for (let i = 0; i < seed.length; i++) h = Math.imul(h ^ seed.charCodeAt(i), 0x01000193);
    const hex = (h >>> 0).toString(16).padStart(8, '0');
    return `${hex}-${hex.slice(0, 4)}-4${hex.slice(1, 4)}-8${hex.slice(4, 7)}-${hex}${hex.slice(0, 4)}`;
  };
  const condition = (type: string, status: string) => ({ type, status, lastProbeTime: null, lastTransitionTime: at });
  const fieldsV1 = {
    'f:metadata': { 'f:generateName': {}, 'f:labels': Object.fromEntries(Object.keys(opts.labels).map((k) => [`f:${k}`, {}])) },
    'f:spec': { 'f:containers': { 'k:{"name":"vllm"}': { '.': {}, 'f:args': {}, 'f:env': {}, 'f:image': {}, 'f:ports': {} } } },
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      generateName: `${replicaSet}-`,
      uid: uid(`${namespace}/${name}`),
      resourceVersion: '1',
      creationTimestamp: at,
      labels: { ...opts.labels, 'pod-template-hash': '7d9f8c6b5' },
      ...(opts.annotations ? { annotations: opts.annotations } : {}),
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: replicaSet, uid: uid(replicaSet), controller: true, blockOwnerDeletion: true },
      ],
      managedFields: [
        { manager: 'kube-controller-manager', operation: 'Update', apiVersion: 'v1', time: at, fieldsType: 'FieldsV1', fieldsV1 },
        {
          manager: 'kubelet',
          operation: 'Update',
          apiVersion: 'v1',
          time: at,
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:status': { 'f:conditions': {}, 'f:containerStatuses': {}, 'f:podIP': {}, 'f:podIPs': {} } },
          subresource: 'status',
        },
      ],
    },
    spec: {
      volumes: [
        { name: 'model-cache', persistentVolumeClaim: { claimName: 'hf-cache' } },
        { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '16Gi' } },
        {
          name: 'kube-api-access',
          projected: {
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
            ],
            defaultMode: 420,
          },
        },
      ],
      containers: [
        {
          name: 'vllm',
          image: 'vllm/vllm-openai:v0.14.0',
          args: ['--model', 'Qwen/Qwen3-8B', '--port', String(port), '--max-model-len', '32768', '--gpu-memory-utilization', '0.92'],
          ports: [{ name: 'http', containerPort: port, protocol: 'TCP' }],
          env: [
            { name: 'HF_HOME', value: '/models' },
            { name: 'VLLM_LOGGING_LEVEL', value: 'INFO' },
            { name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hf-token', key: 'token' } } },
            { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
          ],
          resources: { limits: { 'nvidia.com/gpu': '1', memory: '64Gi' }, requests: { cpu: '8', 'nvidia.com/gpu': '1', memory: '64Gi' } },
          volumeMounts: [
            { name: 'model-cache', mountPath: '/models' },
            { name: 'shm', mountPath: '/dev/shm' },
            { name: 'kube-api-access', readOnly: true, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
          ],
          readinessProbe: {
            httpGet: { path: '/health', port, scheme: 'HTTP' },
            periodSeconds: 5,
            timeoutSeconds: 1,
            successThreshold: 1,
            failureThreshold: 3,
          },
          startupProbe: {
            httpGet: { path: '/health', port, scheme: 'HTTP' },
            periodSeconds: 10,
            timeoutSeconds: 1,
            successThreshold: 1,
            failureThreshold: 60,
          },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
          imagePullPolicy: 'IfNotPresent',
        },
      ],
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      nodeName: `gpu-node-${uid(name).slice(0, 4)}`,
      schedulerName: 'default-scheduler',
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
        { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' },
      ],
      priority: 0,
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
    },
    status: {
      phase: 'Running',
      conditions: [
        condition('PodReadyToStartContainers', 'True'),
        condition('Initialized', 'True'),
        condition('Ready', ready ? 'True' : 'False'),
        condition('ContainersReady', ready ? 'True' : 'False'),
        condition('PodScheduled', 'True'),
      ],
      hostIP: '10.0.3.17',
      hostIPs: [{ ip: '10.0.3.17' }],
      podIP: opts.ip,
      podIPs: [{ ip: opts.ip }],
      startTime: at,
      containerStatuses: [
        {
          name: 'vllm',
          state: { running: { startedAt: at } },
          lastState: {},
          ready,
          restartCount: 0,
          image: 'docker.io/vllm/vllm-openai:v0.14.0',
          imageID: 'docker.io/vllm/vllm-openai@sha256:5f1d9c0b8e2a7f4c3b6d9e0a1f2c3b4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b',
          containerID: `containerd://${uid(name).replace(/-/g, '')}${uid(name).replace(/-/g, '')}`,
          started: true,
        },
      ],
      qosClass: 'Burstable',
    },
  };
}
