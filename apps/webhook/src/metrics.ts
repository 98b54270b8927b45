import { Counter, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from '@triad/runtime';

/** The webhook's Prometheus metrics, served on its ops port. */
export class WebhookMetrics {
  readonly registry = new Registry();
  readonly reviews = new Counter({
    name: 'triad_webhook_reviews_total',
    help: 'AdmissionReviews answered, by kind, operation and result (allowed, denied, malformed)',
    labelNames: ['kind', 'operation', 'result'] as const,
    registers: [this.registry],
  });
  readonly duration = new Histogram({
    name: 'triad_webhook_review_duration_seconds',
    help: 'Time to read, validate and answer one AdmissionReview',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
    registers: [this.registry],
  });
  readonly certReloads = new Counter({
    name: 'triad_webhook_certificate_reloads_total',
    help: 'Serving certificate reloads, by result (ok, error)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) registerProcessMetrics(this.registry);
  }
}
