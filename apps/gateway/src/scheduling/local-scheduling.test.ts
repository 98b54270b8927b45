import { Buckets, ConfigKeys } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { DEFAULT_STAGE_TIMEOUTS } from '@triad/request';
import { createLogger } from '@triad/runtime';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { z } from 'zod';
import { KvView } from '../state/kv-view';
import { LocalSchedulingFallback } from './local-scheduling';

describe('the local fallback follows the scheduler config key', () => {
  let nats: NatsServerHandle;
  let bus: Bus;
  let fallback: LocalSchedulingFallback | undefined;

  beforeAll(async () => {
    nats = await startNatsServer();
    bus = await connectBus({ servers: nats.url, name: 'local-scheduling-test' });
  });
  afterAll(async () => {
    fallback?.stop();
    await bus?.close();
    await nats?.close();
  });

  it('applies a put, and goes back to the defaults when the key is deleted', async () => {
    const logger = createLogger({ service: 'test', level: 'silent' });
    fallback = new LocalSchedulingFallback(new KvView(DEFAULT_STAGE_TIMEOUTS, () => undefined), 'gw-1', logger);
    await fallback.followConfig(bus);
    expect(fallback.local.scheduler.config.topN).toBe(5);
    const kv = await bus.kv(Buckets.config, z.unknown(), { history: 5 });
    await kv.put(ConfigKeys.scheduler, { topN: 2, plugins: [{ type: 'prefix-cache', args: { blockSizeToHash: 32 } }] });
    await waitFor(() => fallback!.local.scheduler.config.topN === 2, { what: 'the put applied' });
    expect(fallback.hashOptions.blockSize).toBe(32);
    await kv.delete(ConfigKeys.scheduler);
    await waitFor(() => fallback!.local.scheduler.config.topN === 5, { what: 'the defaults back after the delete' });
    expect(fallback.hashOptions.blockSize).toBe(64);
  });
});
