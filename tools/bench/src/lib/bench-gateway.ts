// A `triad gateway` child process on NATS for the benchmarks, on free loopback ports, access log off.
import { freePort, spawnTriad, waitReady, type TriadChild } from '@triad/testing';

export interface BenchGateway {
  readonly child: TriadChild;
  /** The API port and its base URL (`http://127.0.0.1:port`). */
  readonly port: number;
  readonly url: string;
  /** The ops port (`/metrics`, `/readyz`). */
  readonly opsPort: number;
}

export interface BenchGatewayOptions {
  /** Flags after the ports, e.g. `['--scheduling', 'in-process']`. */
  readonly args?: readonly string[];
  /** Environment over the defaults (`TRIAD_LOG_LEVEL=warn`, `TRIAD_ACCESS_LOG=false`). */
  readonly env?: Readonly<Record<string, string>>;
}

/** Starts the gateway and resolves once it is ready; a gateway that never gets ready is stopped. */
export async function startBenchGateway(natsUrl: string, options: BenchGatewayOptions = {}): Promise<BenchGateway> {
  const opsPort = await freePort();
  const port = await freePort();
  const child = spawnTriad(
    [
      'gateway',
      '--nats',
      natsUrl,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--metrics-port',
      String(opsPort),
      ...(options.args ?? []),
    ],
    { TRIAD_LOG_LEVEL: 'warn', TRIAD_ACCESS_LOG: 'false', ...options.env },
  );
  try {
    await waitReady(child, opsPort, 'gateway');
  } catch (err) {
    await child.stop();
    throw err;
  }
  return { child, port, url: `http://127.0.0.1:${port}`, opsPort };
}
