import { q, type DashboardSpec } from './grafana';
import { mean, quantile, rateSum, share } from './promql';

const LOCAL_RATIO = `${rateSum('triad_gateway_local_decisions_total')} / ${rateSum('triad_gateway_schedule_duration_seconds_count')}`;

const PICKS = rateSum('triad_scheduler_pick_decider_total', ['profile']);
/** Overruled picks over all picks of the profile; profiles whose scorers have no load bound read 0. */
const OVERRULED_SHARE =
  `${rateSum('triad_scheduler_affinity_overruled_total', ['profile', 'scorer'])} / on (profile) group_left ${PICKS}` +
  ` or on (profile) ${PICKS} * 0`;

/** The scheduler service and the gateways' side of it: decisions, their latency, batching and the fallback. */
export const scheduler: DashboardSpec = {
  uid: 'triad-scheduler',
  title: 'Triad / Scheduler',
  description:
    'Decisions by mode and outcome, what decided the picks and affinity overruled by load, decision and batch latency, ' +
    'plugin cost, the index the scheduler holds, ' +
    "and the gateways' local fallback.",
  variables: [],
  rows: [
    {
      title: 'Decisions',
      panels: [
        {
          title: 'Decisions per second',
          unit: 'ops',
          stacked: true,
          description: 'Scheduling decisions by pipeline mode and outcome (ok, or the error code).',
          queries: [q(rateSum('triad_scheduler_decisions_total', ['mode', 'outcome']), '{{mode}} {{outcome}}')],
        },
        {
          title: 'Decision error ratio',
          unit: 'percentunit',
          description: 'Share of scheduling requests answered with an error. Alert TriadSchedulerErrors fires above 5%.',
          queries: [q(share('triad_scheduler_decisions_total{outcome!="ok"}', 'triad_scheduler_decisions_total', []), 'errors')],
        },
        {
          title: 'Decision latency',
          unit: 's',
          description: 'Time to decide one request inside the scheduler, p50 and p99 by mode.',
          queries: [
            q(quantile(0.5, 'triad_scheduler_decision_duration_seconds', ['mode']), 'p50 {{mode}}'),
            q(quantile(0.99, 'triad_scheduler_decision_duration_seconds', ['mode']), 'p99 {{mode}}'),
          ],
        },
      ],
    },
    {
      title: 'Pick quality',
      panels: [
        {
          title: 'What decided the picks',
          unit: 'ops',
          stacked: true,
          description:
            'Profile picks per second by what gave the first choice its lead over the runner-up: a scorer (its weighted score), ' +
            'tie-break, only-candidate, or an affinity picker. Affinity scorers deciding few picks on a cache-heavy workload ' +
            'mean load scorers outweigh them.',
          queries: [q(rateSum('triad_scheduler_pick_decider_total', ['profile', 'scorer']), '{{profile}} {{scorer}}')],
        },
        {
          title: 'Affinity overruled by load',
          unit: 'percentunit',
          description:
            "Share of each profile's picks where an affinity scorer's endpoint was past its load bound (loadFactor, loadFloor) " +
            'and the request went elsewhere, by scorer (0 for a profile without load-bounded affinity). High while hit ratios ' +
            'are low: the bound, not the affinity, decides.',
          queries: [q(OVERRULED_SHARE, '{{profile}} {{scorer}}')],
        },
      ],
    },
    {
      title: 'Batches (gateway → scheduler)',
      panels: [
        {
          title: 'Batch round trip',
          unit: 's',
          description:
            'One schedule message from a gateway to the scheduler service and back, p50 and p99. ' +
            'Alert TriadSchedulerBatchLatencyHigh fires above 25 ms p99.',
          queries: [
            q(quantile(0.5, 'triad_gateway_schedule_batch_duration_seconds', []), 'p50'),
            q(quantile(0.99, 'triad_gateway_schedule_batch_duration_seconds', []), 'p99'),
          ],
        },
        {
          title: 'Requests per batch',
          unit: 'short',
          description: 'Scheduling requests per triad.v1.schedule message: mean as sent and as received.',
          queries: [
            q(mean('triad_gateway_schedule_batch_size', []), 'sent (gateways)'),
            q(mean('triad_scheduler_batch_size', []), 'received (schedulers)'),
          ],
        },
        {
          title: 'Time to a decision by source',
          unit: 's',
          description: 'Gateway-side wait for a decision, p99, from the scheduler service or the local fallback.',
          queries: [q(quantile(0.99, 'triad_gateway_schedule_duration_seconds', ['source']), '{{source}}')],
        },
        {
          title: 'Local decisions by reason',
          unit: 'ops',
          stacked: true,
          description: 'Decisions the gateways made themselves: scheduler timeout, unavailable, invalid reply, or backing off after one.',
          queries: [q(rateSum('triad_gateway_local_decisions_total', ['reason']), '{{reason}}')],
        },
        {
          title: 'Local decision ratio',
          unit: 'percentunit',
          description: 'Share of decisions made locally. Alert TriadLocalDecisionsHigh fires above 10%.',
          queries: [q(LOCAL_RATIO, 'local')],
        },
      ],
    },
    {
      title: 'Plugins and state',
      panels: [
        {
          title: 'Plugin time per second',
          unit: 's',
          stacked: true,
          description: 'CPU time spent in each filter, scorer and picker plugin, per second of wall time.',
          queries: [q(rateSum('triad_scheduler_plugin_seconds_total', ['kind', 'plugin']), '{{kind}} {{plugin}}')],
        },
        {
          title: 'Endpoints in the index by role',
          unit: 'short',
          description: 'Ready endpoints each scheduler replica knows, by role (max over replicas).',
          queries: [q('max by (role) (triad_scheduler_endpoints)', '{{role}}')],
        },
        {
          title: 'Dispatch feed',
          unit: 'short',
          description:
            'Gateways whose in-flight counts a scheduler holds (max over replicas); dispatch sequence gaps seen and gateways ' +
            'expired for missing snapshots in each interval (all replicas).',
          queries: [
            q('max(triad_scheduler_dispatch_gateways)', 'gateways'),
            q('sum(increase(triad_scheduler_dispatch_gaps_total[$__rate_interval]))', 'gaps'),
            q('sum(increase(triad_scheduler_dispatch_expired_gateways_total[$__rate_interval]))', 'expired'),
          ],
        },
        {
          title: 'Invalid messages dropped',
          unit: 'short',
          description: 'NATS messages and KV values that failed validation in each interval, per replica.',
          queries: [q('increase(triad_scheduler_rejected_messages_total[$__rate_interval])', '{{instance}}')],
        },
        {
          title: 'CPU',
          unit: 'percentunit',
          description: 'CPU seconds per second of each scheduler replica (1 = one core).',
          queries: [q('rate(process_cpu_seconds_total{job="scheduler"}[$__rate_interval])', '{{instance}}')],
        },
        {
          title: 'Memory',
          unit: 'bytes',
          description: 'Resident memory of each scheduler replica.',
          queries: [q('process_resident_memory_bytes{job="scheduler"}', '{{instance}}')],
        },
        {
          title: 'NATS connected',
          unit: 'short',
          description: '1 while a scheduler replica has its NATS connection.',
          queries: [q('triad_nats_connected{job="scheduler"}', '{{instance}}')],
        },
      ],
    },
  ],
};
