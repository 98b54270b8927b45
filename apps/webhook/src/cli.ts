import { Command } from 'commander';
import { OpsSettings, UNITS_HELP, createLogger, guardProcess, onShutdown } from '@triad/runtime';
import { resolveConfig, type WebhookConfig } from './config';

/** `triad webhook`: flags > TRIAD_* env > settings file > defaults → config → HTTPS server until SIGTERM/SIGINT. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = new Command('triad webhook')
    .description('Validating admission webhook (AdmissionReview v1 over HTTPS) for ModelServer, ModelRoute, ExternalModelProvider')
    .option('--host <host>', 'address to listen on (TRIAD_HOST, default 0.0.0.0)')
    .option('--port <port>', 'HTTPS port (TRIAD_WEBHOOK_PORT, default 8443; 0 = free)')
    .option('--tls-cert <file>', 'PEM certificate chain, reloaded on change (TRIAD_TLS_CERT_FILE, default /etc/triad/webhook/tls.crt)')
    .option('--tls-key <file>', 'PEM private key, reloaded on change (TRIAD_TLS_KEY_FILE, default /etc/triad/webhook/tls.key)')
    .option('--metrics-port <port>', 'port of /metrics, /healthz, /readyz (TRIAD_METRICS_PORT, default 9093; 0 = free)')
    .option(OpsSettings.flag, OpsSettings.flagHelp)
    .option('--max-body-bytes <size>', 'largest AdmissionReview accepted, e.g. 8MiB (TRIAD_WEBHOOK_MAX_BODY_BYTES, default 8 MiB)')
    .option('--drain-timeout <duration>', 'longest graceful shutdown (TRIAD_DRAIN_TIMEOUT_MS, default 10s)')
    .option('--settings <file>', 'YAML/JSON settings by flag name, under flags and env (TRIAD_SETTINGS_FILE)')
    .addHelpText('after', UNITS_HELP);
  program.parse([...argv], { from: 'user' });
  const o = program.opts<Record<string, string | undefined>>();
  const flags: Partial<Record<keyof WebhookConfig, unknown>> = {
    host: o['host'],
    port: o['port'],
    tlsCert: o['tlsCert'],
    tlsKey: o['tlsKey'],
    metricsPort: o['metricsPort'],
    metricsHost: o['metricsHost'],
    maxBodyBytes: o['maxBodyBytes'],
    drainTimeoutMs: o['drainTimeout'],
  };
  const settings = o['settings'];
  const config = resolveConfig(flags, process.env, settings);
  const logger = createLogger({ service: 'webhook' });
  // An unhandled rejection is logged and counted (triad_unexpected_errors_total), not the end of the process.
  guardProcess(logger);
  const { startWebhook } = require('./server') as typeof import('./server');
  const webhook = await startWebhook({ config, logger });
  onShutdown(logger, () => webhook.close(), { graceMs: config.drainTimeoutMs });
}
