import { q, type DashboardSpec } from './grafana';
import { quantile, rateSum, share } from './promql';

const M = '{model=~"$model"}';
const REQUESTS = 'kthena_router_requests_total';
const LEGS = 'triad_gateway_upstream_legs_total';
const LOCAL_RATIO = `${rateSum('triad_gateway_local_decisions_total')} / ${rateSum('triad_gateway_schedule_duration_seconds_count')}`;

/** Triad at a glance: traffic, errors, latency per model, and the health of the control plane. */
export const overview: DashboardSpec = {
  uid: 'triad-overview',
  title: 'Triad / Overview',
  description: 'Client traffic, errors and latency per model, and the health of the gateway, scheduler, pod-watcher and NATS links.',
  variables: [{ name: 'model', label: 'Model', query: `label_values(${REQUESTS}, model)`, multi: true }],
  rows: [
    {
      title: 'Traffic',
      panels: [
        {
          title: 'Requests per second by model',
          unit: 'reqps',
          description: 'Client requests finished per second, every status, by the model name clients asked for.',
          queries: [q(rateSum(`${REQUESTS}${M}`, ['model']), '{{model}}')],
        },
        {
          title: 'Requests per second by status',
          unit: 'reqps',
          stacked: true,
          description: 'Client requests by HTTP status code (499: the client left; 5xx: Triad or an engine failed).',
          queries: [q(rateSum(`${REQUESTS}${M}`, ['status_code']), '{{status_code}}')],
        },
        {
          title: 'Tokens per second',
          unit: 'short',
          description: "Prompt (input) and completion (output) tokens per second, from the engines' usage.",
          queries: [q(rateSum(`kthena_router_tokens_total${M}`, ['model', 'token_type']), '{{model}} {{token_type}}')],
        },
        {
          title: 'Requests in flight',
          unit: 'short',
          description: 'Client requests being handled, per model (all gateway replicas).',
          queries: [q('sum by (model) (kthena_router_active_downstream_requests{model=~"$model"})', '{{model}}')],
        },
        {
          title: 'Engine legs in flight by stage',
          unit: 'short',
          stacked: true,
          description: 'Engine calls running now, by stage (encode, prefill, decode, aggregated).',
          queries: [q('sum by (stage) (kthena_router_active_upstream_requests)', '{{stage}}')],
        },
        {
          title: 'Streams being relayed',
          unit: 'short',
          description: 'Server-sent event streams the gateways relay now, per model.',
          queries: [q('sum by (model) (triad_gateway_active_streams{model=~"$model"})', '{{model}}')],
        },
      ],
    },
    {
      title: 'Errors and latency',
      panels: [
        {
          title: '5xx ratio by model',
          unit: 'percentunit',
          description: 'Share of client requests answered with a 5xx. Alert TriadHighErrorRatio fires above 5% for 5 minutes.',
          queries: [q(share(`${REQUESTS}{model=~"$model",status_code=~"5.."}`, `${REQUESTS}${M}`, ['model']), '{{model}}')],
        },
        {
          title: 'Engine leg error ratio by stage',
          unit: 'percentunit',
          description: 'Share of engine legs that failed, by stage, retried legs included (so it shows trouble retries hide).',
          queries: [q(share(`${LEGS}{outcome="error"}`, LEGS, ['stage']), '{{stage}}')],
        },
        {
          title: 'Request duration p99 by model',
          unit: 's',
          description: 'Gateway-side duration of whole requests (to the last byte), p99.',
          queries: [q(quantile(0.99, 'kthena_router_request_duration_seconds', ['model'], M), '{{model}}')],
        },
        {
          title: 'Time to first token p99',
          unit: 's',
          description: 'Router-side time to first token of streamed requests, p99 by model and pipeline mode.',
          queries: [q(quantile(0.99, 'triad_gateway_time_to_first_token_seconds', ['model', 'mode'], M), '{{model}} {{mode}}')],
        },
        {
          title: 'Time per output token p99',
          unit: 's',
          description: 'Router-side time per output token after the first (streamed requests), p99 by model and mode.',
          queries: [q(quantile(0.99, 'triad_gateway_time_per_output_token_seconds', ['model', 'mode'], M), '{{model}} {{mode}}')],
        },
        {
          title: 'EC hand-off failures per second',
          unit: 'ops',
          description: 'Encoder-cache hand-offs between an encode leg and its consumer that failed, by reason.',
          queries: [q(rateSum('triad_gateway_ec_handoff_failures_total', ['reason']), '{{reason}}')],
        },
      ],
    },
    {
      title: 'Control plane',
      panels: [
        {
          title: 'Services up',
          unit: 'short',
          kind: 'stat',
          description: 'Replicas Prometheus scrapes successfully, per service.',
          queries: [q('sum by (job) (up{job=~"gateway|scheduler|pod-watcher"})', '{{job}}')],
        },
        {
          title: 'NATS connected',
          unit: 'short',
          description: '1 while a replica has its NATS connection, 0 while it waits for NATS or reconnects.',
          queries: [q('triad_nats_connected', '{{job}} {{instance}}')],
        },
        {
          title: 'NATS disconnects (15 min)',
          unit: 'short',
          description: 'NATS connections lost in the last 15 minutes, per service. Alert TriadNatsFlapping fires above 3.',
          queries: [q('sum by (job) (increase(triad_nats_disconnects_total[15m]))', '{{job}}')],
        },
        {
          title: 'Local decision ratio',
          unit: 'percentunit',
          description: "Share of scheduling decisions made by the gateways' local fallback (scheduler slow or away).",
          queries: [q(LOCAL_RATIO, 'local')],
        },
        {
          title: 'Stale engine endpoints',
          unit: 'short',
          description: 'Engines whose last scrape failed, and all scraped engines (pod-watcher).',
          queries: [q('max(triad_podwatcher_stale_targets)', 'stale'), q('max(triad_podwatcher_scrape_targets)', 'scraped')],
        },
        {
          title: 'Gateway CPU',
          unit: 'percentunit',
          description: 'CPU seconds per second of each gateway replica (1 = one core).',
          queries: [q('rate(process_cpu_seconds_total{job="gateway"}[$__rate_interval])', '{{instance}}')],
        },
      ],
    },
  ],
};
