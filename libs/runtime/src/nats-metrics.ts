import { Counter, Gauge, type Registry } from 'prom-client';

/** What the NATS client knows of its connection (libs/bus `Bus` has this shape). */
export interface NatsConnectionState {
  readonly connected: boolean;
  /** Connections lost since the client connected first. */
  readonly disconnects: number;
  /** JetStream calls retried through a leader election or a lost node (libs/bus `retryJetStream`). */
  readonly jetStreamRetries?: number;
}

/**
 * `triad_nats_connected` (1 or 0) and `triad_nats_disconnects_total`, the same names in every service (the
 * scrape job tells them apart), read from the live client at scrape time. `state` returns undefined until the
 * first connection (a service waiting for NATS reports 0 connected and 0 disconnects).
 */
export function registerNatsMetrics(registry: Registry, state: () => NatsConnectionState | undefined): void {
  new Gauge({
    name: 'triad_nats_connected',
    help: '1 while the NATS connection is up, 0 while waiting for NATS or reconnecting',
    registers: [registry],
    collect() {
      this.set(state()?.connected === true ? 1 : 0);
    },
  });
  new Counter({
    name: 'triad_nats_disconnects_total',
    help: 'NATS connections lost (each followed by reconnect attempts)',
    registers: [registry],
    collect() {
      const now = state()?.disconnects ?? 0;
      this.reset();
      this.inc(now);
    },
  });
  new Counter({
    name: 'triad_nats_jetstream_retries_total',
    registers: [registry],
    help: 'JetStream calls retried after a transient failure (leader election, a lost cluster node, a reconnect)',
    collect() {
      const now = state()?.jetStreamRetries ?? 0;
      this.reset();
      this.inc(now);
    },
  });
}
