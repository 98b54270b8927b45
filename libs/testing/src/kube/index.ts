export { startFakeKubeServer } from './fake-kube-server';
export type {
  FakeKubeServer,
  FakeKubeServerOptions,
  FakeKubeConfigOptions,
  RecordedRequest,
  RecordedPatch,
  FailableVerb,
} from './fake-kube-server';
export type { KubeObject, WatchEventType } from './object-store';
export { applyMergePatch, applyJsonPatch } from './patch';
export type { JsonPatchOperation } from './patch';
export { servedPod } from './served-pod';
export type { ServedPodOptions } from './served-pod';
