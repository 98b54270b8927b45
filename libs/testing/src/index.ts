export { startNatsServer, startNatsCluster } from './nats-server';
export type { NatsServerHandle, NatsServerOptions, NatsClusterHandle, NatsClusterNode, NatsClusterOptions } from './nats-server';
export { freePort } from './free-port';
export { waitFor } from './wait-for';
export { spawnTriad, waitReady } from './triad-process';
export type { TriadChild } from './triad-process';
