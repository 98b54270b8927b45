import { Kvm } from '@nats-io/kv';
import { z } from 'zod';
import { Buckets, ConfigKeys } from '@triad/bus';
import type { Bus } from '@triad/bus/client';

/**
 * Follows KV `triad_v1_config/scheduler` as raw text (YAML or JSON, as an operator would `nats kv put` it), calling
 * `onChange(text)` on every value and `onChange(undefined)` when the key is deleted. `initial` is the value at start.
 */
export async function watchKvConfig(
  bus: Bus, onChange: (text: string | undefined) => void,
): Promise<{ initial: string | undefined; stop(): void }> {
  // Opening through the typed client creates the bucket (when missing) with the settings the gateway uses: a few
  // revisions of history, so an operator can see what changed.
  await bus.kv(Buckets.config, z.unknown(), { history: 5 });
  const kv = await new Kvm(bus.nc).open(Buckets.config);
  const entry = await kv.get(ConfigKeys.scheduler);
  const initial = entry && entry.operation === 'PUT' ? entry.string() : undefined;
  const iter = await kv.watch({ key: ConfigKeys.scheduler });
  void (async () => {
    for await (const e of iter) onChange(e.operation === 'PUT' ? e.string() : undefined);
  })();
  return { initial, stop: () => iter.stop() };
}
