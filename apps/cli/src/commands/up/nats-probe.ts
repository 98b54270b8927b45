import { connect } from 'node:net';

/** What a NATS server says about itself in the INFO line it sends every new client. */
export type NatsProbe =
  { readonly reachable: false } | { readonly reachable: true; readonly jetstream: boolean; readonly version?: string };

/** host and port of a `nats://host:port` URL (port 4222 when omitted). */
export function natsHostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
  return { host, port: u.port ? Number(u.port) : 4222 };
}

/**
 * Opens a TCP connection and reads the server's INFO line, without a NATS client: enough to tell "nothing
 * there" from "a NATS server without JetStream" from "ready to use".
 */
export function probeNats(host: string, port: number, timeoutMs = 1000): Promise<NatsProbe> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let buffer = '';
    const done = (result: NatsProbe) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done({ reachable: false }));
    socket.on('error', () => done({ reachable: false }));
    socket.on('data', (d) => {
      buffer += d.toString();
      const end = buffer.indexOf('\n');
      if (end < 0) return;
      const line = buffer.slice(0, end).trim();
      if (!line.startsWith('INFO ')) return done({ reachable: false });
      try {
        const info = JSON.parse(line.slice(5)) as { jetstream?: boolean; version?: string };
        done({ reachable: true, jetstream: info.jetstream === true, ...(info.version ? { version: info.version } : {}) });
      } catch {
        done({ reachable: false });
      }
    });
  });
}
