import { z } from 'zod';

const Port = z.coerce.number().int().min(0).max(65535);

/** Webhook settings: flags, with `TRIAD_*` environment variables as defaults. */
export const WebhookConfigSchema = z.object({
  host: z.string().min(1).default('0.0.0.0'),
  /** HTTPS port the API server calls (the Service's targetPort). */
  port: Port.default(8443),
  /** PEM certificate chain and key; re-read when they change (cert-manager renewals, Secret updates). */
  tlsCert: z.string().min(1).default('/etc/triad/webhook/tls.crt'),
  tlsKey: z.string().min(1).default('/etc/triad/webhook/tls.key'),
  metricsPort: Port.default(9093),
  /** Largest AdmissionReview body accepted (the API server sends object and old object). */
  maxBodyBytes: z.coerce.number().int().min(1024).default(8 * 1024 * 1024),
  drainTimeoutMs: z.coerce.number().int().min(0).default(10_000),
});
export type WebhookConfig = z.infer<typeof WebhookConfigSchema>;

export const CONFIG_ENV: Readonly<Record<keyof WebhookConfig, string>> = {
  host: 'TRIAD_HOST',
  port: 'TRIAD_WEBHOOK_PORT',
  tlsCert: 'TRIAD_TLS_CERT_FILE',
  tlsKey: 'TRIAD_TLS_KEY_FILE',
  metricsPort: 'TRIAD_METRICS_PORT',
  maxBodyBytes: 'TRIAD_WEBHOOK_MAX_BODY_BYTES',
  drainTimeoutMs: 'TRIAD_DRAIN_TIMEOUT_MS',
};

/** Flags over environment over defaults; throws one Error naming every bad setting. */
export function resolveConfig(flags: Partial<Record<keyof WebhookConfig, unknown>>, env: NodeJS.ProcessEnv = process.env): WebhookConfig {
  const merged: Record<string, unknown> = {};
  for (const [key, envName] of Object.entries(CONFIG_ENV) as [keyof WebhookConfig, string][]) {
    const value = flags[key] ?? env[envName];
    if (value !== undefined && value !== '') merged[key] = value;
  }
  const parsed = WebhookConfigSchema.safeParse(merged);
  if (!parsed.success) {
    throw new Error(`invalid webhook settings: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'config'}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}
