import { freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { startScheduler, type SchedulerService } from '../src/runner';
import { memoryLogger } from './helpers';

describe('scheduler readiness', () => {
  let nats: NatsServerHandle;
  let service: SchedulerService | undefined;

  beforeAll(async () => {
    nats = await startNatsServer();
  });

  afterAll(async () => {
    await service?.close();
    await nats?.close();
  });

  it(
    'answers probes while NATS is away (not ready), becomes ready once connected and synced, and stops answering after ' + 'close',
    async () => {
      await nats.stop();
      const port = await freePort();
      const starting = startScheduler({
        natsUrl: nats.url,
        metricsPort: port,
        instanceId: 'r',
        shutdownGraceMs: 1000,
        logger: memoryLogger().logger,
      });
      const probe = async (path: string) =>
        fetch(`http://127.0.0.1:${port}${path}`)
          .then(async (r) => [r.status, await r.text()] as const)
          .catch(() => undefined);
      const notReady = await waitFor(() => probe('/readyz'), { what: 'ops server up' });
      expect(notReady?.[0]).toBe(503);
      expect(notReady?.[1]).toMatch(new RegExp(`^not ready: waiting for NATS at ${nats.url}`));
      expect((await probe('/healthz'))?.[0]).toBe(200);
      await nats.start();
      service = await starting;
      expect(await probe('/readyz')).toEqual([200, 'ready']);
      await service.close();
      expect(await probe('/readyz')).toBeUndefined();
    },
  );
});
