import { z } from 'zod';
import { OpsSettings, Setting, resolveSettings, type SettingSources } from '@triad/runtime';

/** Webhook settings: flags over `TRIAD_*` environment variables over a settings file over defaults. */
const WebhookConfigSchema = z.object({
  host: z.string().min(1).default('0.0.0.0'),
  /** HTTPS port the API server calls (the Service's targetPort). */
  port: Setting.port().default(8443),
  /** PEM certificate chain and key; re-read when they change (cert-manager renewals, Secret updates). */
  tlsCert: z.string().min(1).default('/etc/triad/webhook/tls.crt'),
  tlsKey: z.string().min(1).default('/etc/triad/webhook/tls.key'),
  metricsPort: Setting.port().default(9093),
  metricsHost: OpsSettings.host(),
  /** Largest AdmissionReview body accepted (the API server sends object and old object). */
  maxBodyBytes: Setting.bytes(1024).default(8 * 1024 * 1024),
  drainTimeoutMs: Setting.ms(0).default(10_000),
});
export type WebhookConfig = z.infer<typeof WebhookConfigSchema>;

/** The flag / settings-file name and environment variable of each setting. */
export const CONFIG_SOURCES: SettingSources<WebhookConfig> = {
  host: { name: 'host', env: 'TRIAD_HOST' },
  port: { name: 'port', env: 'TRIAD_WEBHOOK_PORT' },
  tlsCert: { name: 'tls-cert', env: 'TRIAD_TLS_CERT_FILE' },
  tlsKey: { name: 'tls-key', env: 'TRIAD_TLS_KEY_FILE' },
  metricsPort: { name: 'metrics-port', env: 'TRIAD_METRICS_PORT' },
  metricsHost: OpsSettings.sources.metricsHost,
  maxBodyBytes: { name: 'max-body-bytes', env: 'TRIAD_WEBHOOK_MAX_BODY_BYTES' },
  drainTimeoutMs: { name: 'drain-timeout', env: 'TRIAD_DRAIN_TIMEOUT_MS' },
};

/**
 * Merges flags over environment variables over a settings file (`file`, else `TRIAD_SETTINGS_FILE`) over
 * defaults and validates the result. Throws a ConfigError listing every bad setting with its flag, variable or
 * file (the CLI prints it and exits 1).
 */
export function resolveConfig(
  flags: Partial<Record<keyof WebhookConfig, unknown>>,
  env: NodeJS.ProcessEnv = process.env,
  file?: string,
): WebhookConfig {
  return resolveSettings('webhook', WebhookConfigSchema, CONFIG_SOURCES, { flags, env, ...(file === undefined ? {} : { file }) });
}
