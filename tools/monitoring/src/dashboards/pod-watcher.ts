import { q, type DashboardSpec } from './grafana';
import { quantile, rateSum, share } from './promql';

/** Discovery and engine scraping: what the pod-watcher sees, scrapes and publishes to NATS KV. */
export const podWatcher: DashboardSpec = {
  uid: 'triad-pod-watcher',
  title: 'Triad / Pod-watcher',
  description:
    'Engine scrapes and their failures, stale endpoints, the objects and endpoints in force, KV publication ' + 'and the writer lease.',
  variables: [],
  rows: [
    {
      title: 'Scraping',
      panels: [
        {
          title: 'Scrapes per second',
          unit: 'ops',
          stacked: true,
          description: 'Engine /metrics and /v1/models requests by result.',
          queries: [q(rateSum('triad_podwatcher_scrapes_total', ['what', 'result']), '{{what}} {{result}}')],
        },
        {
          title: 'Scrape failure ratio',
          unit: 'percentunit',
          description: 'Share of scrapes that failed. Alert TriadScrapeFailures fires above 10% for 10 minutes.',
          queries: [q(share('triad_podwatcher_scrapes_total{result="error"}', 'triad_podwatcher_scrapes_total', ['what']), '{{what}}')],
        },
        {
          title: 'Scrape failures by reason',
          unit: 'ops',
          stacked: true,
          description: 'Failed scrapes per second: timeout, connect, http (non-2xx), body (cut short), parse.',
          queries: [q(rateSum('triad_podwatcher_scrape_errors_total', ['reason']), '{{reason}}')],
        },
        {
          title: 'Scrape duration',
          unit: 's',
          description: 'Duration of one /metrics scrape, p50 and p99.',
          queries: [
            q(quantile(0.5, 'triad_podwatcher_scrape_duration_seconds', []), 'p50'),
            q(quantile(0.99, 'triad_podwatcher_scrape_duration_seconds', []), 'p99'),
          ],
        },
        {
          title: 'Scrape targets and stale ones',
          unit: 'short',
          description: 'Engine addresses scraped, and those whose last scrape failed (alert TriadStaleEndpoints), per replica.',
          queries: [
            q('triad_podwatcher_scrape_targets', 'targets {{instance}}'),
            q('triad_podwatcher_stale_targets', 'stale {{instance}}'),
          ],
        },
      ],
    },
    {
      title: 'Inventory',
      panels: [
        {
          title: 'Endpoints by role',
          unit: 'short',
          stacked: true,
          description: 'Endpoints (pod × ModelServer) in force, by role.',
          queries: [q('max by (role) (triad_podwatcher_endpoints)', '{{role}}')],
        },
        {
          title: 'Objects by kind',
          unit: 'short',
          description:
            'Valid ModelServers, ModelRoutes and Pods in force, and objects whose latest version is invalid ' +
            '(the last valid one stays).',
          queries: [
            q('max by (kind) (triad_podwatcher_objects)', 'valid {{kind}}'),
            q('max by (kind) (triad_podwatcher_invalid_objects)', 'invalid {{kind}}'),
          ],
        },
        {
          title: 'Source events per second',
          unit: 'ops',
          description: 'Object events from Kubernetes (or the file source), by kind and type.',
          queries: [q(rateSum('triad_podwatcher_source_events_total', ['kind', 'type']), '{{kind}} {{type}}')],
        },
      ],
    },
    {
      title: 'Publication',
      panels: [
        {
          title: 'Publish latency p99',
          unit: 's',
          description: 'From a state change to its KV write being acknowledged, p99 by bucket.',
          queries: [q(quantile(0.99, 'triad_podwatcher_publish_latency_seconds', ['bucket']), '{{bucket}}')],
        },
        {
          title: 'KV writes per second',
          unit: 'ops',
          description: 'Writes to the NATS KV buckets by bucket, operation and result.',
          queries: [q(rateSum('triad_podwatcher_kv_writes_total', ['bucket', 'op', 'result']), '{{bucket}} {{op}} {{result}}')],
        },
        {
          title: 'Full republications (1 h)',
          unit: 'short',
          description: 'Whole-state republications (start, reconnect, lease won, error recovery) in the last hour, by result.',
          queries: [q('sum by (result) (increase(triad_podwatcher_full_syncs_total[1h]))', '{{result}}')],
        },
        {
          title: 'Writer lease',
          unit: 'short',
          description: '1 for the replica that holds the writer lease (alert TriadPodWatcherNoLeader when none does).',
          queries: [q('triad_podwatcher_leader', '{{instance}}')],
        },
        {
          title: 'NATS connected',
          unit: 'short',
          description: '1 while a pod-watcher replica has its NATS connection.',
          queries: [q('triad_nats_connected{job="pod-watcher"}', '{{instance}}')],
        },
        {
          title: 'Memory',
          unit: 'bytes',
          description: 'Resident memory of each pod-watcher replica.',
          queries: [q('process_resident_memory_bytes{job="pod-watcher"}', '{{instance}}')],
        },
      ],
    },
  ],
};
