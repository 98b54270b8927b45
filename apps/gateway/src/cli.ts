import { Command } from 'commander';
import { OpsSettings, UNITS_HELP, createLogger, guardProcess, onShutdown } from '@triad/runtime';
import { resolveConfig } from './config';

/** `triad gateway`: flags > TRIAD_* env > settings file > defaults → config → running gateway until SIGTERM/SIGINT. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = new Command('triad gateway')
    .description('OpenAI-compatible ingress and the E→P→D stage loop')
    .option('--nats <url>', 'NATS server(s), comma-separated (TRIAD_NATS_URL)')
    .option('--kv-replicas <n>', 'JetStream replicas of the KV buckets it creates, 1-5 (TRIAD_KV_REPLICAS, default 1)')
    .option('--host <host>', 'listen address (TRIAD_HOST)')
    .option('--port <port>', 'HTTP port for the OpenAI API (TRIAD_PORT, default 8080)')
    .option('--metrics-port <port>', 'port of /metrics, /healthz, /readyz (TRIAD_METRICS_PORT, default 9090; 0 = free)')
    .option(OpsSettings.flag, OpsSettings.flagHelp)
    .option('--body-limit <size>', 'largest request body, e.g. 10MiB or 512KiB (TRIAD_BODY_LIMIT, default 10 MiB)')
    .option(
      '--scheduling <mode>',
      'service (ask the scheduler over NATS) or in-process (decide in the gateway) (TRIAD_SCHEDULING, service)',
    )
    .option('--schedule-budget-ms <duration>', 'wait this long for the scheduler before deciding locally (TRIAD_SCHEDULE_BUDGET_MS, 50ms)')
    .option('--drain-timeout-ms <duration>', 'SIGTERM drain budget (TRIAD_DRAIN_TIMEOUT_MS, 30s)')
    .option(
      '--scheduler-config <file>',
      'the scheduler config file the scheduler runs with (TRIAD_SCHEDULER_CONFIG): prompt ' +
        'hashing for prefix scorers and the local fallback; the KV config overrides it',
    )
    .option('--admission-config <file>', 'admission control: API keys, JWT, token rate limits, fair queue (TRIAD_ADMISSION_CONFIG)')
    .option(
      '--credentials-key-file <file>',
      'key that opens ExternalModelProvider credentials (TRIAD_CREDENTIALS_KEY_FILE, or TRIAD_CREDENTIALS_KEY inline)',
    )
    .option('--provider-retries <n>', 'retries of an ExternalModelProvider call before any byte was sent (TRIAD_PROVIDER_RETRIES, 2)')
    .option('--gateway-api', 'serve Gateway listeners and HTTPRoutes the pod-watcher publishes (TRIAD_GATEWAY_API=true)')
    .option('--no-access-log', 'do not write the per-request access log line (TRIAD_ACCESS_LOG=false)')
    .option('--settings <file>', 'YAML/JSON settings by flag name, under flags and env (TRIAD_SETTINGS_FILE)')
    .addHelpText('after', UNITS_HELP);
  program.parse([...argv], { from: 'user' });
  const opts = program.opts<{
    nats?: string;
    kvReplicas?: string;
    host?: string;
    port?: string;
    metricsPort?: string;
    metricsHost?: string;
    bodyLimit?: string;
    scheduling?: string;
    scheduleBudgetMs?: string;
    drainTimeoutMs?: string;
    accessLog?: boolean;
    admissionConfig?: string;
    schedulerConfig?: string;
    settings?: string;
    credentialsKeyFile?: string;
    providerRetries?: string;
    gatewayApi?: boolean;
  }>();
  const config = resolveConfig(
    {
      nats: opts.nats,
      kvReplicas: opts.kvReplicas,
      host: opts.host,
      port: opts.port,
      metricsPort: opts.metricsPort,
      metricsHost: opts.metricsHost,
      bodyLimit: opts.bodyLimit,
      scheduling: opts.scheduling,
      scheduleBudgetMs: opts.scheduleBudgetMs,
      drainTimeoutMs: opts.drainTimeoutMs,
      accessLog: opts.accessLog === false ? false : undefined,
      admissionConfig: opts.admissionConfig,
      schedulerConfig: opts.schedulerConfig,
      credentialsKeyFile: opts.credentialsKeyFile,
      providerRetries: opts.providerRetries,
      gatewayApi: opts.gatewayApi === true ? true : undefined,
    },
    process.env,
    opts.settings,
  );
  const logger = createLogger({ service: 'gateway' });
  guardProcess(logger);
  // Loaded lazily so `triad gateway --help` does not pay for fastify, undici, NATS and OpenTelemetry.
  const { setupTelemetry } = require('@triad/telemetry') as typeof import('@triad/telemetry');
  const { version } = require('../package.json') as { version: string };
  const telemetry = setupTelemetry({ serviceName: 'triad-gateway', version, logger });
  const { startGateway } = require('./gateway') as typeof import('./gateway');
  const gateway = await startGateway({ config, logger, tracing: telemetry.enabled });
  onShutdown(
    logger,
    async () => {
      await gateway.close();
      await telemetry.shutdown();
    },
    { graceMs: config.drainTimeoutMs + 5_000 },
  );
}
