import { parseAllDocuments } from 'yaml';
import {
  checkKinds,
  checkModelServerWorkloads,
  checkMonitors,
  checkReferences,
  checkSchedulerConfigs,
  checkTriadContainers,
  checkTriadResources,
  checkWorkloads,
  type CrdInfo,
} from './checks';
import type { CommandHelp } from './cli-help';
import type { ManifestDoc } from './documents';

// Each check must catch the mistake it exists for: these plant one and expect the message.

const docs = (yaml: string): ManifestDoc[] =>
  parseAllDocuments(yaml).map((d, i) => ({ file: 'planted.yaml', line: i + 1, value: d.toJS() as Record<string, unknown> }));

const crds: CrdInfo[] = [
  {
    kind: 'ModelServer',
    group: 'networking.serving.volcano.sh',
    versions: ['v1alpha1'],
    file: 'infra/crds/ms.yaml',
  },
];

const deployment = (extra: string, containers: string) => `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}${extra}}
    spec:
      containers:
${containers}`;

describe('manifest checks catch planted mistakes', () => {
  it('unknown kinds, deprecated apiVersions and unserved CR versions', () => {
    expect(
      checkKinds(
        docs(`
apiVersion: autoscaling/v2beta2
kind: HorizontalPodAutoscaler
metadata: {name: a}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: b}
---
apiVersion: networking.serving.volcano.sh/v1beta1
kind: ModelServer
metadata: {name: c}`),
        crds,
      ),
    ).toEqual([
      'planted.yaml:1 HorizontalPodAutoscaler/a: apiVersion autoscaling/v2beta2 should be autoscaling/v2',
      'planted.yaml:2 Widget/b: unknown kind (neither built in nor defined in infra/crds)',
      'planted.yaml:3 ModelServer/c: apiVersion networking.serving.volcano.sh/v1beta1 is not served by the CRD in infra/crds/ms.yaml',
    ]);
  });

  it('Triad resources that libs/crd rejects', () => {
    const problems = checkTriadResources(
      docs(`
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: bad}
spec: {inferenceEngine: vLLM, pipelineMode: pd, workloadPort: {port: 8000}, workloadSelector: {matchLabels: {app: x}}}`),
    );
    expect(problems).toEqual(['planted.yaml:1 ModelServer/bad: spec.workloadSelector.pdGroup: required when pipelineMode is pd']);
  });

  it('selectors that miss the template, undefined $(VAR) in args, and probes on undeclared ports', () => {
    expect(
      checkWorkloads(
        docs(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: other}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: c
          image: nginx
          args: [--advertise, $(POD_IP)]
          readinessProbe: {httpGet: {path: /, port: admin}}`),
      ),
    ).toEqual([
      'planted.yaml:1 Deployment/web: spec.selector.matchLabels does not match the pod template labels',
      'planted.yaml:1 Deployment/web: container c uses $(POD_IP) but defines no env var POD_IP',
      'planted.yaml:1 Deployment/web: container c readinessProbe port admin is not one of its ports',
    ]);
  });

  it('references to objects the unit does not define', () => {
    const problems = checkReferences(
      docs(`${deployment(
        '',
        `
        - name: c
          image: nginx
          envFrom: [{configMapRef: {name: missing-env}}]
          env:
            - {name: A, valueFrom: {secretKeyRef: {name: missing-secret, key: k}}}
            - {name: B, valueFrom: {secretKeyRef: {name: brought-by-user, key: k, optional: true}}}
          volumeMounts: [{name: data, mountPath: /data}]
      serviceAccountName: missing-sa`,
      )}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb}
spec: {minAvailable: 1, selector: {matchLabels: {app: nothing}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: hpa}
spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: nope}, maxReplicas: 2}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: crb}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: absent}
subjects: [{kind: ServiceAccount, name: ghost, namespace: x}]
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: http}]}`),
    );
    expect(problems).toEqual([
      'planted.yaml:1 Deployment/web: serviceAccountName missing-sa is not defined',
      'planted.yaml:1 Deployment/web: ConfigMap missing-env is not defined',
      'planted.yaml:1 Deployment/web: Secret missing-secret is not defined (mark the reference optional if users bring it)',
      'planted.yaml:1 Deployment/web: container c mounts volume data, which the pod does not declare',
      'planted.yaml:2 PodDisruptionBudget/pdb: selector matches no pod template',
      'planted.yaml:3 HorizontalPodAutoscaler/hpa: scaleTargetRef Deployment/nope is not defined',
      'planted.yaml:4 ClusterRoleBinding/crb: roleRef ClusterRole/absent is not defined',
      'planted.yaml:4 ClusterRoleBinding/crb: subject ServiceAccount ghost is not defined',
      'planted.yaml:5 Service/svc: targetPort http is no container port of the selected pods',
    ]);
  });

  it('Triad containers with unknown commands or flags, and services without probes, requests or identity', () => {
    const help = new Map<string, CommandHelp>([['gateway', { ok: true, flags: new Set(['--nats', '--port', '--metrics-port']) }]]);
    const commands = new Set(['gateway', 'scheduler']);
    const problems = checkTriadContainers(
      docs(
        `${deployment(
          ', annotations: {prometheus.io/scrape: "true", prometheus.io/port: "9090"}',
          `
        - name: gw
          image: ghcr.io/triad-llm/triad:1.0
          command: [triad, gateway]
          args: [--port, "8080", --metrics-port, "9090", --verbose]
          ports: [{name: ops, containerPort: 9090}]
          readinessProbe: {httpGet: {path: /healthz, port: ops}}
          livenessProbe: {httpGet: {path: /healthz, port: ops}}
        - name: typo
          image: ghcr.io/triad-llm/triad:1.0
          command: [triad, gatway]`,
        )}`,
      ),
      commands,
      help,
    );
    expect(problems).toEqual([
      'planted.yaml:1 Deployment/web container gw: `triad gateway` has no flag --verbose',
      'planted.yaml:1 Deployment/web container gw (triad gateway): readinessProbe must GET /readyz on the ops port 9090',
      'planted.yaml:1 Deployment/web container gw (triad gateway): startupProbe must GET /healthz on the ops port 9090',
      'planted.yaml:1 Deployment/web container gw (triad gateway): resources.requests needs cpu and memory',
      'planted.yaml:1 Deployment/web container gw (triad gateway): POD_NAME must come from the downward API (metadata.name)',
      'planted.yaml:1 Deployment/web container gw (triad gateway): POD_NAMESPACE must come from the downward API (metadata.namespace)',
      'planted.yaml:1 Deployment/web container typo: must run `triad <command>` with a command of the CLI (gateway, scheduler), not ' +
        '`triad gatway`',
    ]);
  });

  it('PodMonitors that select nothing, scrape an undeclared port or another path, and services nobody scrapes', () => {
    const gateway = deployment(
      '',
      `
        - name: gw
          image: ghcr.io/triad-llm/triad:1.0
          command: [triad, gateway]
          args: [--metrics-port, "9090"]
          ports: [{name: ops, containerPort: 9090}, {name: http, containerPort: 8080}]`,
    ).replace('labels: {app: web}}', 'labels: {app: web, tier: gateway}}');
    const monitor = (name: string, spec: string) => `
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata: {name: ${name}}
spec: ${spec}`;
    expect(
      checkMonitors(
        docs(`${gateway}
---${monitor('none', '{selector: {matchLabels: {app: nope}}, podMetricsEndpoints: [{port: ops}]}')}
---${monitor(
          'wrong',
          `{jobLabel: component, selector: {matchLabels: {app: web}},
  podMetricsEndpoints: [{port: admin}, {port: http, path: /stats}]}`,
        )}`),
      ),
    ).toEqual([
      'planted.yaml:2 PodMonitor/none: selector matches no pod template',
      'planted.yaml:3 PodMonitor/wrong: jobLabel component is not a label of the pods of planted.yaml:1 Deployment/web',
      'planted.yaml:3 PodMonitor/wrong: port admin is no named container port of planted.yaml:1 Deployment/web',
      'planted.yaml:3 PodMonitor/wrong: Triad serves metrics on /metrics, not /stats',
      'planted.yaml:1 Deployment/web: triad gateway is scraped by no PodMonitor on its ops port 9090',
    ]);
    expect(
      checkMonitors(
        docs(`${gateway}
---${monitor('ok', '{jobLabel: tier, selector: {matchLabels: {app: web}}, podMetricsEndpoints: [{port: ops, path: /metrics}]}')}`),
      ),
    ).toEqual([]);
  });

  it('ModelServers whose workloads miss a role or its port', () => {
    const problems = checkModelServerWorkloads(
      docs(`
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: pd}
spec:
  inferenceEngine: vLLM
  pipelineMode: pd
  workloadPort: {port: 8000}
  workloadSelector: {matchLabels: {app: m}, pdGroup: {groupKey: g, prefillLabels: {role: p}, decodeLabels: {role: d}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: prefill}
spec:
  selector: {matchLabels: {app: m, role: p}}
  template:
    metadata: {labels: {app: m, role: p, g: a}}
    spec: {containers: [{name: e, image: vllm, ports: [{containerPort: 9000}]}]}`),
    );
    expect(problems).toEqual([
      'planted.yaml:2 Deployment/prefill: plays prefill for ModelServer pd but no container declares port 8000',
      'planted.yaml:1 ModelServer/pd: no pod template plays its decode role',
    ]);
  });

  it('scheduler configs the scheduler would refuse', () => {
    const problems = checkSchedulerConfigs(
      docs(`
apiVersion: v1
kind: ConfigMap
metadata: {name: triad-scheduler-config}
data:
  scheduler.yaml: |
    topN: 0
    colour: blue`),
    );
    expect(problems.length).toBe(2);
    expect(problems[0]).toMatch(/^planted.yaml:1 ConfigMap\/triad-scheduler-config: scheduler.yaml topN: /);
  });
});
