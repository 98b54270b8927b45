import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { startSimEngine } from '@triad/engine-sim';
import type { KubeObject } from '@triad/testing/kube';

/**
 * A simulated fleet for the pod-watcher benchmark: N "pods" on distinct loopback addresses (127.1.x.y) and one
 * port, each a tiny HTTP listener that answers /metrics with the text a zero-profile vLLM engine-sim serves
 * (captured once, ~26 KB) and /v1/models with its model list. In `busy` mode the running-request gauge changes
 * on every scrape, so every endpoint record changes at the scrape cadence (the watcher's worst case).
 */
export interface ScrapeFleet {
  readonly port: number;
  readonly ips: readonly string[];
  busy: boolean;
  /** /metrics requests answered so far. */
  scrapes(): number;
  /** TCP connections accepted so far (a scraper that keeps connections alive opens about two per pod). */
  connections(): number;
  close(): Promise<void>;
}

export function podIp(i: number): string {
  return `127.1.${Math.floor(i / 250)}.${(i % 250) + 1}`;
}

async function captureEngineText(): Promise<{ metrics: string; models: string }> {
  const sim = await startSimEngine({ engine: 'vllm', role: 'both', latencyProfile: 'zero' });
  try {
    const metrics = await (await fetch(`${sim.url}/metrics`)).text();
    const models = await (await fetch(`${sim.url}/v1/models`)).text();
    return { metrics, models };
  } finally {
    await sim.close();
  }
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve((server.address() as { port: number }).port));
  });
}

export async function startScrapeFleet(pods: number): Promise<ScrapeFleet> {
  const { metrics, models } = await captureEngineText();
  const marker = /vllm:num_requests_running\{[^}]*\} [0-9.]+/;
  const line = marker.exec(metrics)?.[0] ?? '';
  const head = metrics.slice(0, metrics.indexOf(line));
  const tail = metrics.slice(metrics.indexOf(line) + line.length);
  const prefix = line.slice(0, line.lastIndexOf(' ') + 1);
  let scrapes = 0;
  let connections = 0;
  const fleet: ScrapeFleet = {
    port: 0,
    ips: [],
    busy: false,
    scrapes: () => scrapes,
    connections: () => connections,
    close: async () => undefined,
  };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/metrics') {
      scrapes += 1;
      const text = fleet.busy ? `${head}${prefix}${Math.floor(Math.random() * 8)}.0${tail}` : metrics;
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(text);
    } else if (req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(models);
    } else {
      res.writeHead(404).end();
    }
  };
  const servers: Server[] = [];
  const ips: string[] = [];
  let port = 0;
  for (let i = 0; i < pods; i++) {
    const server = createServer(handler);
    server.keepAliveTimeout = 60_000;
    server.on('connection', () => {
      connections += 1;
    });
    port = await listen(server, port, podIp(i));
    servers.push(server);
    ips.push(podIp(i));
  }
  return Object.assign(fleet, {
    port,
    ips,
    close: async () => {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
    },
  });
}

const API_VERSION = 'networking.serving.volcano.sh/v1alpha1';

/** One PD ModelServer selecting every fleet pod (half prefill, half decode, groups of 10). */
export function fleetObjects(fleet: ScrapeFleet): KubeObject[] {
  const ms: KubeObject = {
    apiVersion: API_VERSION,
    kind: 'ModelServer',
    metadata: { name: 'bench', namespace: 'default' },
    spec: {
      model: 'sim-model',
      inferenceEngine: 'vLLM',
      pipelineMode: 'pd',
      workloadPort: { port: fleet.port },
      kvConnector: { type: 'nixl' },
      workloadSelector: {
        matchLabels: { app: 'bench' },
        pdGroup: { groupKey: 'group', prefillLabels: { role: 'prefill' }, decodeLabels: { role: 'decode' } },
      },
    },
  };
  return [ms, ...fleet.ips.map((ip, i) => benchPod(i, ip, i % 2 === 0 ? 'prefill' : 'decode'))];
}

export function benchPod(i: number, ip: string, role: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `bench-${i}`, namespace: 'default', labels: { app: 'bench', group: `g${Math.floor(i / 10)}`, role } },
    status: { phase: 'Running', podIP: ip, conditions: [{ type: 'Ready', status: 'True' }] },
  };
}
