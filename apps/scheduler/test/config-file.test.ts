import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectBus, type Bus } from '@triad/bus/client';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startScheduler, type SchedulerService } from '../src/runner';
import { memoryLogger, putEndpoints, putModelServer, req, schedule } from './helpers';

describe('scheduler config file', () => {
  let nats: NatsServerHandle;
  let client: Bus;
  let service: SchedulerService | undefined;
  let dir: string;
  const logs = memoryLogger();

  beforeAll(async () => {
    nats = await startNatsServer();
    client = await connectBus({ servers: nats.url, name: 'test-client' });
    await putModelServer(client, { name: 'ms' });
    await putEndpoints(client, [{ pod: 'p0' }, { pod: 'p1' }, { pod: 'p2' }]);
    dir = mkdtempSync(join(tmpdir(), 'triad-sched-config-'));
  });

  afterAll(async () => {
    await service?.close();
    await client?.close();
    await nats?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const attempts = async (id: string): Promise<number> => {
    const reply = await schedule(client, [req(id)]);
    if (!('decisions' in reply) || !reply.decisions[0]?.ok) throw new Error(JSON.stringify(reply));
    return reply.decisions[0].attempts.length;
  };

  it('refuses to start on an invalid file, with the reasons', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'plugins: [{type: nope}]\nprofiles: {decode: {filters: [missing]}}\n');
    await expect(
      startScheduler({
        natsUrl: nats.url,
        metricsPort: 0,
        instanceId: 'x',
        shutdownGraceMs: 1000,
        configFile: bad,
        logger: logs.logger,
      }),
    ).rejects.toThrow(
      new RegExp(
        String.raw`plugins\[0\]\.type: unknown plugin type 'nope'.*\n\s+` +
          String.raw`profiles\.decode\.filters\[0\]: references undefined plugin 'missing'`,
      ),
    );
  });

  it('loads the file, applies a valid edit live, and keeps the running config on an invalid edit', async () => {
    const file = join(dir, 'scheduler.yaml');
    writeFileSync(file, 'topN: 1\n');
    service = await startScheduler({
      natsUrl: nats.url,
      metricsPort: 0,
      instanceId: 'file',
      shutdownGraceMs: 1000,
      configFile: file,
      logger: logs.logger,
    });
    expect(service.activeConfig().origin).toBe('file');
    expect(await attempts('one')).toBe(1);

    // replace by rename, as editors and ConfigMap updates do
    writeFileSync(join(dir, 'next.yaml'), 'topN: 2\nprofiles:\n  default: {filters: [kv-pressure], scorers: [gpu-usage]}\n');
    renameSync(join(dir, 'next.yaml'), file);
    await waitFor(() => service?.activeConfig().version === 2, { what: 'edited file applied' });
    expect(await attempts('two')).toBe(2);
    expect(service.scheduler.config.profiles.decode.filters.map((f) => f.name)).toEqual(['kv-pressure']);

    writeFileSync(
      file,
      'topN: 3\nprofiles:\n  default: {scorers: [{plugin: least-latency, weight: 1}]}\nplugins: [{type: least-latency, args: ' +
        '{TTFTTPOTWeightFactor: .nan}}]\n',
    );
    await waitFor(
      () => logs.lines.some((l) => l['source'] === 'file' && l['msg'] === 'invalid scheduler config rejected; keeping the running one'),
      { what: 'rejection logged' },
    );
    expect(service.activeConfig().version).toBe(2);
    expect(await attempts('still-two')).toBe(2);
  });
});
