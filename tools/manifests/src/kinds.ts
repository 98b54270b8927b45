/**
 * The Kubernetes kinds the repo's manifests may use, with the one apiVersion each must be written with (the
 * current stable group/version; deprecated ones such as autoscaling/v2beta2 or policy/v1beta1 are refused).
 */
export const BUILT_IN_KINDS: Readonly<Record<string, string>> = {
  Namespace: 'v1',
  ConfigMap: 'v1',
  Secret: 'v1',
  Service: 'v1',
  ServiceAccount: 'v1',
  Pod: 'v1',
  PersistentVolumeClaim: 'v1',
  Deployment: 'apps/v1',
  StatefulSet: 'apps/v1',
  DaemonSet: 'apps/v1',
  Job: 'batch/v1',
  CronJob: 'batch/v1',
  Role: 'rbac.authorization.k8s.io/v1',
  RoleBinding: 'rbac.authorization.k8s.io/v1',
  ClusterRole: 'rbac.authorization.k8s.io/v1',
  ClusterRoleBinding: 'rbac.authorization.k8s.io/v1',
  PodDisruptionBudget: 'policy/v1',
  HorizontalPodAutoscaler: 'autoscaling/v2',
  NetworkPolicy: 'networking.k8s.io/v1',
  Ingress: 'networking.k8s.io/v1',
  CustomResourceDefinition: 'apiextensions.k8s.io/v1',
  ValidatingWebhookConfiguration: 'admissionregistration.k8s.io/v1',
  Kustomization: 'kustomize.config.k8s.io/v1beta1',
  Component: 'kustomize.config.k8s.io/v1alpha1',
  // Prometheus Operator kinds (infra/monitoring); their CRDs come with the operator, e.g. kube-prometheus-stack.
  PodMonitor: 'monitoring.coreos.com/v1',
  PrometheusRule: 'monitoring.coreos.com/v1',
  // Not built in, but installed by the projects Triad works with: Gateway API and its Inference Extension
  // (Gateway API mode), cert-manager (the webhook's certificate).
  Gateway: 'gateway.networking.k8s.io/v1',
  HTTPRoute: 'gateway.networking.k8s.io/v1',
  InferencePool: 'inference.networking.k8s.io/v1',
  Certificate: 'cert-manager.io/v1',
  Issuer: 'cert-manager.io/v1',
};

/** Kinds whose pods are described by a pod template. */
export const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'Job', 'CronJob']);
