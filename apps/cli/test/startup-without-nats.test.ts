import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, spawnTriad, startNatsServer, waitFor, type NatsServerHandle, type TriadChild } from '@triad/testing';

// The three services started before NATS exists, as a Kubernetes rollout can order them: each answers its probes
// at once (live, not ready, with the reason), logs that it waits for NATS, and becomes ready when a real
// nats-server appears on the address it was given. Then a NATS restart shows in the connection metrics.

const dir = mkdtempSync(join(tmpdir(), 'triad-startup-'));
const configPath = join(dir, 'cluster.yaml');
writeFileSync(
  configPath,
  `
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: tiny, namespace: default}
spec: {model: tiny-model, inferenceEngine: vLLM, workloadPort: {port: 8000}, workloadSelector: {matchLabels: {app: tiny}}}
---
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelRoute
metadata: {name: tiny, namespace: default}
spec: {modelName: tiny, rules: [{targetModels: [{modelServerName: tiny}]}]}
`,
);

interface Service {
  readonly name: string;
  readonly opsPort: number;
  readonly child: TriadChild;
}

const probe = (port: number, path: string) =>
  fetch(`http://127.0.0.1:${port}${path}`).then(
    async (r) => ({ status: r.status, text: await r.text() }),
    () => undefined,
  );

/** The value of an unlabelled sample in a service's /metrics text. */
async function metric(port: number, name: string): Promise<number | undefined> {
  const text = (await probe(port, '/metrics'))?.text ?? '';
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

describe('start-up without NATS (gateway, scheduler, pod-watcher as child processes)', () => {
  let natsPort = 0;
  let natsUrl = '';
  let nats: NatsServerHandle | undefined;
  const services: Service[] = [];

  beforeAll(async () => {
    natsPort = await freePort();
    natsUrl = `nats://127.0.0.1:${natsPort}`;
    const start = async (name: string, args: (opsPort: number) => string[]) => {
      const opsPort = await freePort();
      services.push({ name, opsPort, child: spawnTriad([name, '--nats', natsUrl, ...args(opsPort)], { TRIAD_LOG_LEVEL: 'info' }) });
    };
    await start('gateway', (ops) => ['--host', '127.0.0.1', '--port', '0', '--metrics-port', String(ops), '--drain-timeout-ms', '1000']);
    await start('scheduler', (ops) => ['--metrics-port', String(ops)]);
    await start('pod-watcher', (ops) => ['--source', `file:${configPath}`, '--metrics-port', String(ops)]);
  });

  afterAll(async () => {
    await Promise.all(services.map((s) => s.child.stop()));
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('each service answers /healthz 200 and /readyz 503 naming the NATS address, and logs that it waits', async () => {
    for (const s of services) {
      const ready = await waitFor(() => probe(s.opsPort, '/readyz'), { what: `${s.name} ops port`, timeoutMs: 60_000, intervalMs: 50 });
      expect(`${s.name}: ${ready.status} ${ready.text}`).toMatch(new RegExp(`^${s.name}: 503 not ready: waiting for NATS at ${natsUrl}`));
      expect((await probe(s.opsPort, '/healthz'))?.status).toBe(200);
      expect(await metric(s.opsPort, 'triad_nats_connected')).toBe(0);
      const logged = () => s.child.output().includes(`"msg":"waiting for NATS at ${natsUrl}"`);
      await waitFor(logged, { what: `${s.name} to log that it waits for NATS` });
      // The reason names the failed attempt once there was one.
      const later = await waitFor(
        async () => {
          const r = await probe(s.opsPort, '/readyz');
          return r?.text.includes('(attempt ') ? r : undefined;
        },
        { what: `${s.name} readiness reason with the attempt` },
      );
      expect(later.text).toMatch(/\(attempt \d+: .*ECONNREFUSED/);
    }
  }, 90_000);

  it('each becomes ready once nats-server appears on that address', async () => {
    nats = await startNatsServer({ port: natsPort });
    for (const s of services) {
      const ready = async () => (await probe(s.opsPort, '/readyz'))?.status === 200;
      await waitFor(ready, { what: `${s.name} ready after NATS appeared`, timeoutMs: 30_000, intervalMs: 50 });
      expect(await metric(s.opsPort, 'triad_nats_connected')).toBe(1);
      // The child's log reaches this process through a pipe, on its own schedule relative to the HTTP probes.
      await waitFor(() => s.child.output().includes(`"msg":"connected to NATS at ${natsUrl}"`), {
        what: `${s.name} to log the connection`,
      });
    }
  }, 60_000);

  it('a NATS restart counts as a disconnect and the connection comes back', async () => {
    const gateway = services.find((s) => s.name === 'gateway') as Service;
    expect(await metric(gateway.opsPort, 'triad_nats_disconnects_total')).toBe(0);
    await nats?.stop();
    await waitFor(async () => (await metric(gateway.opsPort, 'triad_nats_connected')) === 0, { what: 'gateway to see the disconnect' });
    expect(await metric(gateway.opsPort, 'triad_nats_disconnects_total')).toBe(1);
    await nats?.start();
    const reconnected = async () => (await metric(gateway.opsPort, 'triad_nats_connected')) === 1;
    await waitFor(reconnected, { what: 'gateway to reconnect', timeoutMs: 20_000 });
    // The gateway serves from its last view while NATS is away; it is ready after the reconnect.
    expect((await probe(gateway.opsPort, '/readyz'))?.status).toBe(200);
  }, 60_000);
});
