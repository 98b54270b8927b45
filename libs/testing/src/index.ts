export { startNatsServer } from './nats-server';
export type { NatsServerHandle, NatsServerOptions } from './nats-server';
export { freePort } from './free-port';
export { waitFor } from './wait-for';
export { spawnTriad, waitReady } from './triad-process';
export type { TriadChild } from './triad-process';
