import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { aggregatedManifests, freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { renderReadyBanner } from '../src/commands/up/banner';
import type { UpOptions } from '../src/commands/up/options';
import { startStack, type RunningStack } from '../src/commands/up/stack';
import { StartupError } from '../src/commands/up/startup-error';
import { listeningAddresses } from './helpers/listening';
import { processesOf, stillAlive } from './helpers/processes';

// The supervisor end to end with stand-in services (a fake `triad` entry script) and a real nats-server: start,
// readiness, prefixed logs, crash detection, ordered stop, and the watchdog when `triad up` itself is killed.
// The real services are covered by up.e2e.test.ts.

const fixtures = join(__dirname, '../src/commands/up/__fixtures__');
const fakeEntry = join(fixtures, 'fake-triad.cjs');
const workDir = mkdtempSync(join(tmpdir(), 'triad-up-supervision-'));

function writeConfig(simPort: number): string {
  const path = join(workDir, `cluster-${simPort}.yaml`);
  writeFileSync(
    path,
    aggregatedManifests({ server: 'tiny', model: 'tiny-model', port: simPort, podIps: ['127.0.93.1'], routes: [{ modelName: 'tiny' }] }),
  );
  return path;
}

async function options(overrides: Partial<UpOptions> = {}): Promise<UpOptions> {
  return {
    configPath: writeConfig(await freePort()),
    port: await freePort(),
    host: '127.0.0.1',
    nats: { kind: 'spawn' },
    simLatency: 'zero',
    rawLogs: false,
    readyTimeoutMs: 60_000,
    stopTimeoutMs: 2_000,
    ...overrides,
  };
}

function capture(): { out: PassThrough; text: () => string } {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d: Buffer) => {
    text += d.toString();
  });
  return { out, text: () => text };
}

const env = (extra: NodeJS.ProcessEnv = {}) => ({ cliEntry: fakeEntry, env: { ...process.env, ...extra }, color: false });
const running: RunningStack[] = [];
const drivers: ChildProcess[] = [];
const natsServers: NatsServerHandle[] = [];

afterAll(async () => {
  await Promise.all(running.map((s) => s.stop()));
  await Promise.all(natsServers.map((n) => n.close()));
  for (const d of drivers) if (d.exitCode === null) d.kill('SIGKILL');
  rmSync(workDir, { recursive: true, force: true });
});

describe('triad up supervisor (stand-in services)', () => {
  it('starts NATS and every service, waits for readiness, prefixes their logs, and stops them all', async () => {
    const log = capture();
    const stack = await startStack(await options(), { ...env(), out: log.out });
    running.push(stack);
    expect(stack.nats.origin).toBe('started');
    expect(stack.services.map((s) => s.name)).toEqual(['sim-pods', 'pod-watcher', 'scheduler', 'gateway']);
    expect(stack.plan.sims.map((s) => `${s.key} ${s.engine} ${s.role} ${s.host}`)).toEqual(['default/tiny-0 vllm both 127.0.93.1']);
    // pino lines come out readable and prefixed with the service name
    expect(log.text()).toMatch(/^gateway {5}\| \d\d:\d\d:\d\d\.\d{3} INFO {2}fake service started args=/m);
    const banner = renderReadyBanner(stack, 1234, workDir);
    expect(banner).toContain(`Triad is ready in 1.2 s: gateway ${stack.gatewayUrl}`);
    expect(banner).toContain(`curl -s ${stack.gatewayUrl}/v1/chat/completions`);

    const groups = stack.pids();
    expect(groups).toHaveLength(5);
    const processes = processesOf(process.pid, groups);
    // the scheduler's grandchild ignores SIGTERM: it must go with its process group anyway
    expect(processes.length).toBeGreaterThan(groups.length);
    await stack.stop();
    expect(stillAlive(processes)).toEqual([]);
    expect(stack.pids()).toEqual([]);
  });

  it('with --host 0.0.0.0 tells every service to listen on every interface, and the banner says so', async () => {
    const log = capture();
    const stack = await startStack(await options({ host: '0.0.0.0' }), { ...env(), out: log.out });
    running.push(stack);
    expect(renderReadyBanner(stack, 1000, workDir)).toContain('listen   0.0.0.0: every interface, so other machines can reach them');
    // The gateway is still printed and reached at loopback, where this machine gets to a wildcard listener.
    expect(stack.gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const gatewayPort = Number(new URL(stack.gatewayUrl).port);
    const ports = [gatewayPort, ...stack.services.map((s) => s.opsPort)];
    expect(ports.map((p) => listeningAddresses(p).join(' '))).toEqual(ports.map(() => '0.0.0.0'));
    await stack.stop();
  });

  it('reuses a JetStream server on the local address that holds no Triad state, says so, and removes its buckets on stop', async () => {
    const shared = await startNatsServer();
    natsServers.push(shared);
    const log = capture();
    const stack = await startStack(await options({ nats: { kind: 'auto' } }), {
      ...env(),
      out: log.out,
      localNats: { host: '127.0.0.1', port: shared.port },
    });
    running.push(stack);
    expect(stack.nats).toEqual({ url: `nats://127.0.0.1:${shared.port}`, origin: 'local' });
    expect(log.text()).toMatch(
      new RegExp(`triad up: note: reusing the NATS server already running on 127\\.0\\.0\\.1:${shared.port} \\(nats-server [0-9.]+\\)`),
    );
    expect(renderReadyBanner(stack, 1000, workDir)).toContain('reused: the server already running on this machine');
    // What the services would create there (the stand-ins create nothing): a Triad bucket, and someone else's.
    const nc = await connect({ servers: shared.url });
    try {
      await new Kvm(nc).create('triad_v1_endpoints');
      await new Kvm(nc).create('someone_elses');
      await stack.stop();
      const streams: string[] = [];
      for await (const name of (await jetstreamManager(nc)).streams.names()) streams.push(name);
      expect(streams).toEqual(['KV_someone_elses']);
    } finally {
      await nc.close();
      // Closed here, not after all tests: later tests count this process's children.
      await shared.close();
    }
  });

  it('never writes into a local server that already holds Triad buckets: it starts its own and says why', async () => {
    const shared = await startNatsServer();
    natsServers.push(shared);
    const nc = await connect({ servers: shared.url });
    try {
      const theirs = await new Kvm(nc).create('triad_v1_endpoints');
      await theirs.put('default.tiny.pod-0', 'their record');
      const log = capture();
      const stack = await startStack(await options({ nats: { kind: 'auto' } }), {
        ...env(),
        out: log.out,
        localNats: { host: '127.0.0.1', port: shared.port },
      });
      running.push(stack);
      expect(stack.nats.origin).toBe('started');
      expect(stack.nats.url).not.toBe(shared.url);
      expect(log.text()).toContain(
        `triad up: note: the NATS server on 127.0.0.1:${shared.port} already holds Triad buckets (triad_v1_endpoints: another ` +
          `stack's, or left by a run that was killed), so triad up started its own rather than write into them; ` +
          `--nats nats://127.0.0.1:${shared.port} shares that server on purpose`,
      );
      await stack.stop();
      expect((await theirs.get('default.tiny.pod-0'))?.string()).toBe('their record');
    } finally {
      await nc.close();
      await shared.close();
    }
  });

  it('reports a service that crashes after start-up', async () => {
    const stack = await startStack(await options(), { ...env(), out: capture().out });
    running.push(stack);
    const gateway = stack.services.find((s) => s.name === 'gateway');
    process.kill(gateway?.pid as number, 'SIGKILL');
    const { child, exit } = await stack.crashed;
    expect(child.name).toBe('gateway');
    expect(exit.signal).toBe('SIGKILL');
    const processes = processesOf(process.pid, stack.pids());
    await stack.stop();
    expect(stillAlive(processes)).toEqual([]);
  });

  it("fails with the service's own words when one exits during start-up, and stops the others", async () => {
    const before = processesOf(process.pid);
    const error = await startStack(await options(), { ...env({ FAKE_TRIAD_FAIL: 'scheduler' }), out: capture().out }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StartupError);
    expect((error as Error).message).toMatch(/scheduler (exited with code 3|stopped while the stack was starting)/);
    expect((error as Error).message).toContain('failing on purpose');
    await waitFor(() => processesOf(process.pid).every((p) => before.includes(p)), { what: 'every started process to be gone' });
  });

  it('stops what it started when interrupted during start-up (Ctrl-C)', async () => {
    const before = processesOf(process.pid);
    const interrupt = new AbortController();
    const log = capture();
    const starting = startStack(await options(), { ...env(), out: log.out, abort: interrupt.signal });
    await waitFor(() => log.text().includes('triad up: NATS at'), { what: 'NATS to be up' });
    interrupt.abort();
    const error = await starting.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StartupError);
    expect((error as Error).message).toContain('interrupted while starting');
    expect(processesOf(process.pid).filter((p) => !before.includes(p))).toEqual([]);
  });

  it('refuses a gateway port that is taken, before starting anything', async () => {
    const blocker: Server = createServer();
    const port = await freePort();
    await new Promise<void>((r) => blocker.listen(port, '0.0.0.0', () => r()));
    try {
      const before = processesOf(process.pid);
      const error = await startStack(await options({ port }), { ...env(), out: capture().out }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StartupError);
      expect((error as Error).message).toContain(
        `127.0.0.1:${port} is already in use, so the gateway (--port ${port}) cannot listen on it`,
      );
      expect(processesOf(process.pid).filter((p) => !before.includes(p))).toEqual([]);
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  });

  it('refuses an invalid config with the libs/crd reasons and line numbers', async () => {
    const path = join(workDir, 'invalid.yaml');
    writeFileSync(
      path,
      [
        'apiVersion: networking.serving.volcano.sh/v1alpha1',
        'kind: ModelServer',
        'metadata: {name: bad, namespace: default}',
        'spec: {inferenceEngine: TensorRT, workloadPort: {port: 8000}, workloadSelector: {matchLabels: {app: x}}}',
      ].join('\n'),
    );
    const error = await startStack(await options({ configPath: path }), { ...env(), out: capture().out }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StartupError);
    expect((error as Error).message).toContain(`${path}:1  ModelServer default/bad`);
    expect((error as Error).message).toContain('spec.inferenceEngine');
  });

  it('stops every service through the watchdog when triad up itself is killed', async () => {
    const opts = await options();
    const driver = spawn(process.execPath, [join(fixtures, 'up-driver.cjs'), opts.configPath, String(opts.port), fakeEntry], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    drivers.push(driver);
    let stdout = '';
    let stderr = '';
    driver.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    driver.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const groups = await waitFor(
      () => {
        if (driver.exitCode !== null) throw new Error(`driver exited: ${stderr}`);
        const m = /^READY (.*)$/m.exec(stdout);
        return m ? (JSON.parse(m[1]) as number[]) : undefined;
      },
      { timeoutMs: 60_000, what: 'the driver to report a ready stack' },
    );
    const processes = processesOf(driver.pid as number, groups);
    expect(groups).toHaveLength(5);
    driver.kill('SIGKILL');
    await waitFor(() => stillAlive(processes).length === 0, { timeoutMs: 15_000, what: 'the watchdog to stop every orphaned service' });
  });
});
