import { z } from 'zod';
import { Buckets } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { waitFor } from '@triad/testing';
import { KTHENA_DEFAULT_CONFIG, LEAST_REQUEST_CONFIG, RANDOM_CONFIG, type PolicyName } from '../cluster-sim/policy-set';
import { preciseSchedulerConfig } from './kv-routing';

/**
 * The policies the process benchmark runs, each a scheduler config (the built-in defaults for `triad`);
 * `triad-precise` (the defaults with precise-prefix-cache: engines publish KV events, a kv-indexer runs) is run
 * when named.
 */
export const PROCESS_POLICIES = ['triad', 'random', 'least-request', 'kthena', 'triad-precise'] as const;
export type ProcessPolicy = (typeof PROCESS_POLICIES)[number];
export const DEFAULT_PROCESS_POLICIES: readonly ProcessPolicy[] = ['triad', 'random', 'least-request', 'kthena'];

/** Whether a policy routes on the engines' KV events (the stack then runs a kv-indexer). */
export const needsKvEvents = (policy: ProcessPolicy): boolean => policy === 'triad-precise';

/** What a policy's config may depend on in the stack it runs on. */
export interface PolicyContext {
  /** The tokenizer directory the engines use (stacks whose engines publish KV events). */
  readonly tokenizerDir: string | undefined;
}

/**
 * Round-robin has no scheduler plugin (the simulator's `round-robin` is a policy of its own), so a user cannot
 * configure it; the process benchmark leaves it out.
 */
export const CONFIGS: Readonly<Record<ProcessPolicy, (c: PolicyContext) => object | undefined>> = {
  triad: () => undefined,
  random: () => RANDOM_CONFIG,
  'least-request': () => LEAST_REQUEST_CONFIG,
  kthena: () => KTHENA_DEFAULT_CONFIG,
  'triad-precise': ({ tokenizerDir }) => {
    if (tokenizerDir === undefined) throw new Error('triad-precise needs engines that publish KV events');
    return preciseSchedulerConfig(tokenizerDir);
  },
};

/** The simulator's policy of the same name (calibration; the simulator has no KV-event index, so precise is triad). */
export const SIM_POLICY: Readonly<Record<ProcessPolicy, PolicyName>> = {
  triad: 'triad',
  random: 'random',
  'least-request': 'least-request',
  kthena: 'kthena',
  'triad-precise': 'triad',
};

/**
 * Applies a policy as an operator would: `nats kv put triad_v1_config scheduler <config as JSON>`, then waits for
 * the scheduler to log that it applied the config from KV. `triad` pushes nothing: the defaults stay in effect.
 */
export async function applyPolicy(
  natsUrl: string,
  policy: ProcessPolicy,
  schedulerLog: () => string,
  context: PolicyContext = { tokenizerDir: undefined },
): Promise<void> {
  const config = CONFIGS[policy](context);
  if (config === undefined) {
    await waitFor(() => schedulerLog().includes('"origin":"default"'), { what: 'scheduler runs its defaults', timeoutMs: 30_000 });
    return;
  }
  const bus = await connectBus({ servers: natsUrl, name: 'cluster-bench' });
  try {
    const kv = await bus.kv(Buckets.config, z.unknown(), { history: 5 });
    await kv.put('scheduler', config);
  } finally {
    await bus.close();
  }
  await waitFor(() => /"origin":"kv"[^\n]*scheduler config applied|scheduler config applied[^\n]*"origin":"kv"/.test(schedulerLog()), {
    what: `scheduler applied the ${policy} config from KV`,
    timeoutMs: 30_000,
  });
}
