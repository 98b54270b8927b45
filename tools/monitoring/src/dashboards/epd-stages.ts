import { q, type DashboardSpec } from './grafana';
import { mean, quantile, rateSum, share } from './promql';

const M = '{model="$model"}';
const LEGS = 'triad_gateway_upstream_legs_total';

/** One model's requests split into their E, P and D stages: where the time goes and which stage fails. */
export const epdStages: DashboardSpec = {
  uid: 'triad-epd-stages',
  title: 'Triad / EPD stage breakdown',
  description:
    'Per model: duration of the encode fan-out, prefill and decode stages, first-token and per-token latency by mode, ' +
    'and engine leg errors by stage.',
  variables: [
    { name: 'model', label: 'Model', query: 'label_values(triad_gateway_stage_duration_seconds_count, model)', multi: false },
    {
      name: 'model_server',
      label: 'Model server',
      multi: true,
      query: 'label_values(kthena_router_requests_total{model="$model"}, model_server)',
    },
  ],
  rows: [
    {
      title: 'Stage durations',
      panels: [
        {
          title: 'Stage duration p50',
          unit: 's',
          description: "Median duration of each stage (encode: the whole fan-out over the request's media items).",
          queries: [q(quantile(0.5, 'triad_gateway_stage_duration_seconds', ['stage'], M), '{{stage}}')],
        },
        {
          title: 'Stage duration p99',
          unit: 's',
          description: 'p99 duration of each stage.',
          queries: [q(quantile(0.99, 'triad_gateway_stage_duration_seconds', ['stage'], M), '{{stage}}')],
        },
        {
          title: 'Mean stage duration',
          unit: 's',
          stacked: true,
          description: "Mean time per request spent in each stage, stacked: the split of a request's engine time.",
          queries: [q(mean('triad_gateway_stage_duration_seconds', ['stage'], M), '{{stage}}')],
        },
      ],
    },
    {
      title: 'Tokens',
      panels: [
        {
          title: 'Time to first token by mode',
          unit: 's',
          description: 'Router-side time to first token of streamed requests, p50 and p99, by pipeline mode.',
          queries: [
            q(quantile(0.5, 'triad_gateway_time_to_first_token_seconds', ['mode'], M), 'p50 {{mode}}'),
            q(quantile(0.99, 'triad_gateway_time_to_first_token_seconds', ['mode'], M), 'p99 {{mode}}'),
          ],
        },
        {
          title: 'Time per output token by mode',
          unit: 's',
          description: 'Router-side time per output token after the first, p50 and p99, by pipeline mode.',
          queries: [
            q(quantile(0.5, 'triad_gateway_time_per_output_token_seconds', ['mode'], M), 'p50 {{mode}}'),
            q(quantile(0.99, 'triad_gateway_time_per_output_token_seconds', ['mode'], M), 'p99 {{mode}}'),
          ],
        },
        {
          title: 'Tokens per second',
          unit: 'short',
          description: 'Prompt and completion tokens per second for this model.',
          queries: [q(rateSum(`kthena_router_tokens_total${M}`, ['token_type']), '{{token_type}}')],
        },
      ],
    },
    {
      title: 'Engine legs',
      panels: [
        {
          title: 'Legs per second by stage',
          unit: 'ops',
          description: 'Engine calls per second of the selected model servers, by stage and outcome.',
          queries: [q(rateSum(`${LEGS}{model_server=~"$model_server"}`, ['stage', 'outcome']), '{{stage}} {{outcome}}')],
        },
        {
          title: 'Leg error ratio by stage',
          unit: 'percentunit',
          description: "Share of the model servers' engine legs that failed, by stage. Alert TriadStageErrorRatio fires above 10%.",
          queries: [
            q(
              share(
                'triad_gateway_upstream_legs_total{model_server=~"$model_server",outcome="error"}',
                'triad_gateway_upstream_legs_total{model_server=~"$model_server"}',
                ['stage'],
              ),
              '{{stage}}',
            ),
          ],
        },
        {
          title: 'Requests by status',
          unit: 'reqps',
          stacked: true,
          description: "This model's client requests by HTTP status.",
          queries: [q(rateSum(`kthena_router_requests_total${M}`, ['status_code']), '{{status_code}}')],
        },
        {
          title: 'EC hand-off failures (all models)',
          unit: 'ops',
          description: 'Encoder-cache hand-offs that failed, by reason (the metric has no model label).',
          queries: [q(rateSum('triad_gateway_ec_handoff_failures_total', ['reason']), '{{reason}}')],
        },
      ],
    },
  ],
};
