import { hostname } from 'node:os';
import { Command } from 'commander';
import { z } from 'zod';
import { NatsSettings, OpsSettings, Setting, UNITS_HELP, resolveSettings, type SettingSources } from '@triad/runtime';
import { DEFAULT_PICK_QUALITY_EVERY } from './service/decide-tracing';

/** What `triad scheduler` runs with (flags, else env, else a settings file, else defaults). */
export interface SchedulerServiceOptions {
  readonly natsUrl: string;
  /** JetStream replicas of the KV buckets it creates (TRIAD_KV_REPLICAS; 3 on a 3-node NATS cluster). */
  readonly kvReplicas?: number;
  /** Scheduler config YAML, watched for changes. */
  readonly configFile?: string;
  /** Port of /healthz, /readyz and /metrics; 0 picks a free one. */
  readonly metricsPort: number;
  /** Address of the ops port (TRIAD_METRICS_HOST, default every interface). */
  readonly metricsHost?: string;
  /** Name in `Decision.decidedBy`, logs and the NATS connection. */
  readonly instanceId: string;
  /** Longest a SIGTERM drain may take. */
  readonly shutdownGraceMs: number;
  /**
   * Traced decisions get `filter`/`score` child spans per profile run (`TRIAD_TRACE_SCHEDULER_PHASES=true`). Off
   * by default: at 100 % sampling they made tracing cost 31 % of EPD throughput instead of 10 % (docs/tracing.md).
   */
  readonly tracePhases?: boolean;
  /**
   * One decision in this many is judged for the pick-quality counters (`TRIAD_PICK_QUALITY_EVERY`, default 16;
   * 1 judges every decision). The judgement copies every score column of the decision's profile runs.
   */
  readonly pickQualityEvery?: number;
  /**
   * How long the affinity records this replica learns wait for company before they go out on `triad.v1.affinity`
   * (`TRIAD_AFFINITY_FLUSH_MS`, default 10; 0: with the reply of the batch that taught them): they leave with the
   * reply of the first batch decided after the window (its socket write), or 5 windows after the first record
   * when no batch comes. Each message wakes nats-server and every subscriber (the other replicas, every gateway's
   * fallback); the replica itself applies its records at once, the others see them a window or more later.
   */
  readonly affinityFlushMs?: number;
}

const DEFAULT_METRICS_PORT = 9091;
/** See `affinityFlushMs`. */
export const DEFAULT_AFFINITY_FLUSH_MS = 10;

const SchedulerSettingsSchema = z.object({
  natsUrl: NatsSettings.servers().default(NatsSettings.defaultUrl),
  kvReplicas: NatsSettings.kvReplicas().default(1),
  configFile: Setting.file().optional(),
  metricsPort: Setting.port().default(DEFAULT_METRICS_PORT),
  metricsHost: OpsSettings.host(),
  instanceId: z
    .string()
    .min(1)
    .default(() => `${hostname()}-${process.pid}`),
  shutdownGraceMs: Setting.ms(0).default(10_000),
  tracePhases: z
    .union([z.boolean(), z.enum(['true', 'false'])], { error: 'expected true or false' })
    .transform((v) => v === true || v === 'true')
    .default(false),
  pickQualityEvery: Setting.count(1).default(DEFAULT_PICK_QUALITY_EVERY),
  affinityFlushMs: Setting.ms(0, 1000).default(DEFAULT_AFFINITY_FLUSH_MS),
});

/** The flag / settings-file name and environment variable of each setting. */
const SOURCES: SettingSources<z.infer<typeof SchedulerSettingsSchema>> = {
  natsUrl: NatsSettings.sources.nats,
  kvReplicas: NatsSettings.sources.kvReplicas,
  configFile: { name: 'config', env: 'TRIAD_SCHEDULER_CONFIG' },
  metricsPort: { name: 'metrics-port', env: 'TRIAD_METRICS_PORT' },
  metricsHost: OpsSettings.sources.metricsHost,
  instanceId: { name: 'instance-id', env: ['TRIAD_INSTANCE_ID', 'POD_NAME'] },
  shutdownGraceMs: { name: 'shutdown-grace-ms', env: 'TRIAD_SHUTDOWN_GRACE_MS' },
  tracePhases: { name: 'trace-scheduler-phases', env: 'TRIAD_TRACE_SCHEDULER_PHASES' },
  pickQualityEvery: { name: 'pick-quality-every', env: 'TRIAD_PICK_QUALITY_EVERY' },
  affinityFlushMs: { name: 'affinity-flush-ms', env: 'TRIAD_AFFINITY_FLUSH_MS' },
};

/** Parses `triad scheduler` flags with their env equivalents (TRIAD_NATS_URL, TRIAD_SCHEDULER_CONFIG, ...). */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): SchedulerServiceOptions {
  const program = new Command('triad scheduler')
    .description('scheduling service: answers triad.v1.schedule in queue group "schedulers"')
    .option('--nats <url>', 'NATS server(s), comma-separated (TRIAD_NATS_URL, default nats://127.0.0.1:4222)')
    .option('--kv-replicas <n>', 'JetStream replicas of the KV buckets it creates, 1-5 (TRIAD_KV_REPLICAS, default 1)')
    .option('--config <file>', 'scheduler config YAML, hot-reloaded (TRIAD_SCHEDULER_CONFIG)')
    .option('--metrics-port <port>', `/healthz /readyz /metrics port, 0 = any (TRIAD_METRICS_PORT, default ${DEFAULT_METRICS_PORT})`)
    .option(OpsSettings.flag, OpsSettings.flagHelp)
    .option('--instance-id <id>', 'instance name in decisions and logs (TRIAD_INSTANCE_ID, else POD_NAME, else hostname-pid)')
    .option('--settings <file>', 'YAML/JSON settings by flag name, under flags and env (TRIAD_SETTINGS_FILE)')
    .addHelpText('after', UNITS_HELP)
    .exitOverride();
  program.parse([...argv], { from: 'user' });
  const o = program.opts<{
    nats?: string;
    kvReplicas?: string;
    config?: string;
    metricsPort?: string;
    metricsHost?: string;
    instanceId?: string;
    settings?: string;
  }>();
  return resolveSettings('scheduler', SchedulerSettingsSchema, SOURCES, {
    flags: {
      natsUrl: o.nats,
      kvReplicas: o.kvReplicas,
      configFile: o.config,
      metricsPort: o.metricsPort,
      metricsHost: o.metricsHost,
      instanceId: o.instanceId,
    },
    env,
    ...(o.settings === undefined ? {} : { file: o.settings }),
  });
}
