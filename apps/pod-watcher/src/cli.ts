import { Command } from 'commander';
import { OpsSettings, UNITS_HELP, createLogger, guardProcess, onShutdown } from '@triad/runtime';
import { resolveConfig, type WatcherConfig } from './config';

const VERSION = '0.1.0';

const collect = (value: string, previous: string[]): string[] => [
  ...previous,
  ...value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
];

/** `triad pod-watcher`: flags > TRIAD_* env > settings file > defaults → config → running watcher until SIGTERM/SIGINT. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = new Command('triad pod-watcher')
    .description('Discovery (Kubernetes or a YAML file), role classification and engine metrics → NATS KV')
    .option('--nats <url>', 'NATS server(s), comma-separated (TRIAD_NATS_URL, default nats://127.0.0.1:4222)')
    .option('--kv-replicas <n>', 'JetStream replicas of the KV buckets it creates, 1-5 (TRIAD_KV_REPLICAS, default 1)')
    .option('--source <source>', 'kube or file:PATH (TRIAD_SOURCE, default kube)')
    .option('--namespace <ns>', 'namespace to watch, repeatable; default all (TRIAD_NAMESPACES, comma-separated)', collect, [])
    .option('--kubeconfig <path>', 'kubeconfig file (default KUBECONFIG, ~/.kube/config or in-cluster)')
    .option('--metrics-port <port>', 'port of /metrics, /healthz, /readyz (TRIAD_METRICS_PORT, default 9092; 0 = free)')
    .option(OpsSettings.flag, OpsSettings.flagHelp)
    .option('--scrape-interval <duration>', 'engine /metrics scrape interval (TRIAD_SCRAPE_INTERVAL_MS, default 1s)')
    .option('--scrape-timeout <duration>', 'timeout of one scrape request (TRIAD_SCRAPE_TIMEOUT_MS, default 2s)')
    .option('--scrape-concurrency <n>', 'scrapes in flight at once (TRIAD_SCRAPE_CONCURRENCY, default 64)')
    .option('--models-interval <duration>', 'GET /v1/models refresh per endpoint (TRIAD_MODELS_INTERVAL_MS, default 15s)')
    .option('--metrics-heartbeat <duration>', "publish this replica's scrape freshness this often (TRIAD_METRICS_HEARTBEAT_MS, default 2s)")
    .option(
      '--record-heartbeat <duration>',
      'also rewrite each unchanged endpoint record this often, for readers older than scrape freshness (TRIAD_RECORD_HEARTBEAT_MS, default never)',
    )
    .option(
      '--registry-interval <duration>',
      'SGLang encoder-registry reconcile period (TRIAD_REGISTRY_INTERVAL_MS, default = scrape interval)',
    )
    .option('--registry-evicted-ttl <duration>', 're-register an encoder SGLang evicted only after (TRIAD_REGISTRY_EVICTED_TTL_MS, 10m)')
    .option('--encoders-per-prefill <n>', 'encoders per SGLang language-only registry, 0 = all (TRIAD_ENCODERS_PER_PREFILL, default 0)')
    .option('--server-info-interval <duration>', 'SGLang /server_info refresh per engine (TRIAD_SERVER_INFO_INTERVAL_MS, default 30s)')
    .option('--lease-ttl <duration>', 'writer lease: a standby takes over after this long without renewal (TRIAD_LEASE_TTL_MS, default 5s)')
    .option(
      '--shard-heartbeat <duration>',
      'scrape-shard heartbeat; a replica silent for 3 leaves its share (TRIAD_SHARD_HEARTBEAT_MS, 1s)',
    )
    .option('--identity <name>', 'this replica in the writer lease (TRIAD_IDENTITY, else POD_NAME, else hostname-pid)')
    .option('--drain-timeout <duration>', 'longest graceful shutdown (TRIAD_DRAIN_TIMEOUT_MS, default 10s)')
    .option('--gateway-api', 'Gateway API mode: watch Gateways, HTTPRoutes, InferencePools (TRIAD_GATEWAY_API=true)')
    .option(
      '--gateway-class <name>',
      'GatewayClass whose Gateways are served, repeatable (TRIAD_GATEWAY_CLASSES, default kthena-router,triad)',
      collect,
      [],
    )
    .option(
      '--default-gateway <ns/name:port>',
      "the default Gateway's record, or none (TRIAD_DEFAULT_GATEWAY, default $POD_NAMESPACE/default:8080)",
    )
    .option(
      '--credentials-key-file <file>',
      'key that seals provider credentials for the gateway (TRIAD_CREDENTIALS_KEY_FILE, or TRIAD_CREDENTIALS_KEY inline)',
    )
    .option(
      '--engine-credentials-dir <dir>',
      "the gateway's engine credentials dir mounted here too, for the watcher's own engine reads (TRIAD_ENGINE_CREDENTIALS_DIR, default none)",
    )
    .option('--settings <file>', 'YAML/JSON settings by flag name, under flags and env (TRIAD_SETTINGS_FILE)')
    .addHelpText('after', UNITS_HELP);
  program.parse([...argv], { from: 'user' });
  const o = program.opts<Record<string, string | string[] | undefined>>();
  const flags: Partial<Record<keyof WatcherConfig, unknown>> = {
    nats: o['nats'],
    kvReplicas: o['kvReplicas'],
    source: o['source'],
    namespaces: o['namespace'],
    kubeconfig: o['kubeconfig'],
    metricsPort: o['metricsPort'],
    metricsHost: o['metricsHost'],
    scrapeIntervalMs: o['scrapeInterval'],
    scrapeTimeoutMs: o['scrapeTimeout'],
    scrapeConcurrency: o['scrapeConcurrency'],
    modelsIntervalMs: o['modelsInterval'],
    metricsHeartbeatMs: o['metricsHeartbeat'],
    recordHeartbeatMs: o['recordHeartbeat'],
    registryIntervalMs: o['registryInterval'],
    registryEvictedTtlMs: o['registryEvictedTtl'],
    encodersPerPrefill: o['encodersPerPrefill'],
    serverInfoIntervalMs: o['serverInfoInterval'],
    leaseTtlMs: o['leaseTtl'],
    identity: o['identity'],
    drainTimeoutMs: o['drainTimeout'],
    gatewayApi: o['gatewayApi'] === undefined ? undefined : true,
    gatewayClasses: o['gatewayClass'],
    defaultGateway: o['defaultGateway'],
    credentialsKeyFile: o['credentialsKeyFile'],
    engineCredentialsDir: o['engineCredentialsDir'],
    shardHeartbeatMs: o['shardHeartbeat'],
  };
  const settings = o['settings'];
  const config = resolveConfig(flags, process.env, typeof settings === 'string' ? settings : undefined);
  const logger = createLogger({ service: 'pod-watcher' });
  // An unhandled rejection is logged and counted (triad_unexpected_errors_total), not the end of the process.
  guardProcess(logger);
  // Loaded lazily so `triad pod-watcher --help` does not pay for NATS, undici, the sources and OpenTelemetry.
  const { setupTelemetry } = require('@triad/telemetry') as typeof import('@triad/telemetry');
  const { startPodWatcher } = require('./watcher') as typeof import('./watcher');
  // Reconcile and encoder-registry passes are traced (their own traces) when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  const telemetry = setupTelemetry({ serviceName: 'triad-pod-watcher', version: VERSION, logger });
  const watcher = await startPodWatcher({ config, logger }).catch(async (err: unknown) => {
    await telemetry.shutdown();
    throw err;
  });
  onShutdown(
    logger,
    async () => {
      await watcher.close();
      await telemetry.shutdown();
    },
    { graceMs: config.drainTimeoutMs },
  );
}
