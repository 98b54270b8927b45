import { Command } from 'commander';
import { durationArg } from '../../arg-parsers';
import { createLogger, onShutdown, startOpsServer, watchFile } from '@triad/runtime';
import { loadStackConfig } from './config';
import { SimFleet } from './sim-fleet';
import { planSims, type SimSpec } from './sim-plan';

type EngineSim = typeof import('@triad/engine-sim');
type SimEngineOptions = import('@triad/engine-sim').SimEngineOptions;

interface SimHostFlags {
  config: string;
  tokenizer?: string;
  sharedEcDir: string;
  metricsPort: string;
  metricsHost: string;
  latency: 'zero' | 'realistic';
  drainMs: number;
}

function simOptions(spec: SimSpec, flags: SimHostFlags, logger: SimEngineOptions['logger']): SimEngineOptions {
  return {
    ...(logger ? { logger } : {}),
    engine: spec.engine,
    role: spec.role,
    host: spec.host,
    port: spec.port,
    model: spec.model,
    latencyProfile: flags.latency,
    ...(spec.usesSharedEc ? { sharedEcDir: flags.sharedEcDir } : {}),
    ...(spec.bootstrapPort !== undefined ? { bootstrapPort: spec.bootstrapPort } : {}),
    ...(spec.languageOnly ? { languageOnly: true } : {}),
    ...(spec.encoderBootstrapPort !== undefined ? { encoderBootstrapPort: spec.encoderBootstrapPort } : {}),
    ...(spec.loraAdapters.length > 0 ? { loraAdapters: spec.loraAdapters } : {}),
    ...(spec.ecConnector ? { ecConnector: spec.ecConnector } : {}),
    ...(spec.enableMmEmbeds ? { enableMmEmbeds: true } : {}),
    ...(spec.dataParallel ? { dataParallel: spec.dataParallel } : {}),
    ...(spec.ecControlPort !== undefined ? { ecControlPort: spec.ecControlPort } : {}),
    ...(spec.kvConnector ? { kvConnector: spec.kvConnector } : {}),
    ...(spec.lmcacheStore ? { lmcacheStore: spec.lmcacheStore } : {}),
    // The hashing the local stack's scheduler config asks the gateway for (stack.ts): vLLM's defaults with
    // PYTHONHASHSEED=0, 16-token blocks.
    ...(spec.kvEvents && flags.tokenizer
      ? { kvEvents: { ...spec.kvEvents, tokenizer: flags.tokenizer, blockSize: 16, hashAlgo: 'sha256', hashSeed: '0' } }
      : {}),
  };
}

/**
 * `triad _sim-pods` (internal, started by `triad up`): hosts the engine sims of every loopback pod of the config
 * in one process, which starts faster and uses far less memory than one process per pod. It follows edits of
 * the config file, as the pod-watcher does, and is ready once every sim of the first plan listens.
 */
export async function main(argv: readonly string[]): Promise<void> {
  const flags = new Command('triad _sim-pods')
    .requiredOption('--config <file>')
    .requiredOption('--shared-ec-dir <dir>')
    .option('--tokenizer <dir>', 'tokenizer of every sim that publishes KV events (pods with triad.io/kv-events-endpoint)')
    .option('--metrics-port <port>', 'ops port (/healthz, /readyz)', '0')
    .option('--metrics-host <address>', 'ops address', '127.0.0.1')
    .option('--latency <profile>', 'zero or realistic', 'realistic')
    .option('--drain-ms <duration>', "how long a removed pod's sim keeps serving", durationArg({ min: 0 }), 5000)
    .parse([...argv], { from: 'user' })
    .opts<SimHostFlags>();
  const logger = createLogger({ service: 'sim-pods' });
  const { startSimEngine } = require('@triad/engine-sim') as EngineSim;
  const fleet = new SimFleet(
    (spec) => startSimEngine(simOptions(spec, flags, logger.child({ pod: spec.key }))),
    {
      started: (spec, sim) =>
        logger.info({ pod: spec.key, engine: spec.engine, role: spec.role, url: sim.url, model: spec.model }, 'engine sim started'),
      stopped: (spec) => logger.info({ pod: spec.key }, 'engine sim stopped'),
      failed: (spec, err) =>
        logger.error({ pod: spec.key, address: `${spec.host}:${spec.port}`, err: err.message }, 'engine sim failed to start'),
    },
    flags.drainMs,
  );

  const plan = () => {
    const config = loadStackConfig(flags.config);
    return planSims(config.modelServers, config.modelRoutes, config.pods).sims;
  };
  const failedAtStart = await fleet.apply(plan());
  if (failedAtStart.length > 0) {
    logger.flush?.();
    throw new Error(
      `${failedAtStart.length} engine sim(s) could not start: ` +
        `${failedAtStart.map((s) => `${s.key} on ${s.host}:${s.port}`).join(', ')}`,
    );
  }

  // Reloads run one at a time; edits that land during one are folded into a single follow-up reload.
  let reloading: Promise<void> | undefined;
  let again = false;
  const reload = (): void => {
    if (reloading) {
      again = true;
      return;
    }
    reloading = (async () => {
      do {
        again = false;
        try {
          await fleet.apply(plan());
        } catch (err) {
          logger.warn({ err: (err as Error).message }, 'config not applied; the running sims stay as they are');
        }
      } while (again);
      reloading = undefined;
    })();
  };
  const watcher = watchFile(
    flags.config,
    () => reload(),
    (err) => logger.warn({ err: err.message }, 'config watch failed; edits are not applied'),
  );

  const ops = await startOpsServer({ host: flags.metricsHost, port: Number(flags.metricsPort), readiness: () => ({ ready: true }) });
  logger.info({ sims: fleet.keys().length, opsPort: ops.port }, 'engine sims ready');
  onShutdown(
    logger,
    async () => {
      watcher.close();
      await reloading;
      await fleet.closeAll();
      await ops.close();
    },
    { graceMs: 10_000 },
  );
}
