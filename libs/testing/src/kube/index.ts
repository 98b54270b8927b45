export { startFakeKubeServer } from './fake-kube-server';
export type { FakeKubeServer, FakeKubeServerOptions } from './fake-kube-server';
export type { KubeObject } from './object-store';
export { servedPod } from './served-pod';
