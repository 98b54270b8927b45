import { Kvm } from '@nats-io/kv';
import { z } from 'zod';
import { Buckets, ConfigKeys } from '../names';
import type { Bus } from './bus';
import { retryJetStream } from './js-retry';

/**
 * Follows KV `triad_v1_config/scheduler` as raw text (YAML or JSON, as an operator would `nats kv put` it), calling
 * `onChange(text)` on every value and `onChange(undefined)` when the key is deleted. `initial` is the value at start.
 * Every scheduler replica follows it, the scheduler service's and a gateway's in-process one alike.
 */
export async function watchSchedulerConfig(
  bus: Bus,
  onChange: (text: string | undefined) => void,
): Promise<{ initial: string | undefined; stop(): void }> {
  // Opening through the typed client creates the bucket (when missing) with the settings the gateway uses: a few
  // revisions of history, so an operator can see what changed.
  await bus.kv(Buckets.config, z.unknown(), { history: 5 });
  // On a cluster that is still electing leaders (a fresh start, a node lost) each call can time out: retried like
  // every other JetStream call, so a replica starting next to a forming cluster waits instead of exiting.
  const kv = await retryJetStream(() => new Kvm(bus.nc).open(Buckets.config), bus.jsRetry);
  const entry = await retryJetStream(() => kv.get(ConfigKeys.scheduler), bus.jsRetry);
  const initial = entry && entry.operation === 'PUT' ? entry.string() : undefined;
  const iter = await retryJetStream(() => kv.watch({ key: ConfigKeys.scheduler }), bus.jsRetry);
  void (async () => {
    for await (const e of iter) onChange(e.operation === 'PUT' ? e.string() : undefined);
  })();
  return { initial, stop: () => iter.stop() };
}
