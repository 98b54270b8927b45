import { hostname } from 'node:os';
import { Command } from 'commander';

/** What `triad scheduler` runs with (flags, else env, else defaults). */
export interface SchedulerServiceOptions {
  readonly natsUrl: string;
  /** Scheduler config YAML, watched for changes. */
  readonly configFile?: string;
  /** Port of /healthz, /readyz and /metrics; 0 picks a free one. */
  readonly metricsPort: number;
  /** Name in `Decision.decidedBy`, logs and the NATS connection. */
  readonly instanceId: string;
  /** Longest a SIGTERM drain may take. */
  readonly shutdownGraceMs: number;
  /**
   * Traced decisions get `filter`/`score` child spans per profile run (`TRIAD_TRACE_SCHEDULER_PHASES=true`). Off
   * by default: at 100 % sampling they made tracing cost 31 % of EPD throughput instead of 10 % (docs/tracing.md).
   */
  readonly tracePhases?: boolean;
}

export const DEFAULT_METRICS_PORT = 9091;

/** Parses `triad scheduler` flags with their env equivalents (TRIAD_NATS_URL, TRIAD_SCHEDULER_CONFIG, ...). */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): SchedulerServiceOptions {
  const program = new Command('triad scheduler')
    .description('scheduling service: answers triad.v1.schedule in queue group "schedulers"')
    .option('--nats <url>', 'NATS server(s), comma-separated (TRIAD_NATS_URL)', env['TRIAD_NATS_URL'] ?? 'nats://127.0.0.1:4222')
    .option('--config <file>', 'scheduler config YAML, hot-reloaded (TRIAD_SCHEDULER_CONFIG)', env['TRIAD_SCHEDULER_CONFIG'])
    .option('--metrics-port <port>', '/healthz /readyz /metrics port, 0 = any (TRIAD_METRICS_PORT)', env['TRIAD_METRICS_PORT'] ?? String(DEFAULT_METRICS_PORT))
    .option('--instance-id <id>', 'instance name in decisions and logs (TRIAD_INSTANCE_ID, POD_NAME)', env['TRIAD_INSTANCE_ID'] ?? env['POD_NAME'] ?? `${hostname()}-${process.pid}`)
    .exitOverride();
  program.parse([...argv], { from: 'user' });
  const o = program.opts<{ nats: string; config?: string; metricsPort: string; instanceId: string }>();
  const metricsPort = Number(o.metricsPort);
  if (!Number.isInteger(metricsPort) || metricsPort < 0 || metricsPort > 65535) throw new Error(`--metrics-port: not a port: ${o.metricsPort}`);
  return {
    natsUrl: o.nats,
    ...(o.config ? { configFile: o.config } : {}),
    metricsPort,
    instanceId: o.instanceId,
    shutdownGraceMs: Number(env['TRIAD_SHUTDOWN_GRACE_MS'] ?? 10_000),
    tracePhases: tracePhasesOf(env['TRIAD_TRACE_SCHEDULER_PHASES']),
  };
}

/** `TRIAD_TRACE_SCHEDULER_PHASES`: true or false (default); anything else is refused with the variable named. */
function tracePhasesOf(raw: string | undefined): boolean {
  if (raw === 'true') return true;
  if (raw === undefined || raw === '' || raw === 'false') return false;
  throw new Error(`TRIAD_TRACE_SCHEDULER_PHASES: expected true or false, got ${raw}`);
}
