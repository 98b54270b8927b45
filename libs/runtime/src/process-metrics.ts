import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * prom-client's gauges whose names end in `_total` although they are not counters (`promtool check metrics`
 * flags them): each is the sum of the by-type gauge of the same name without the suffix, which stays.
 */
const MISNAMED_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

const registered = new WeakSet<Registry>();

/**
 * The standard process and Node.js metrics in a service's registry: `process_cpu_seconds_total`,
 * `process_resident_memory_bytes`, `nodejs_heap_size_used_bytes`, `nodejs_eventloop_lag_seconds`... under the
 * names every Node exporter uses, without a service prefix (Prometheus' `job` label tells the services apart, so
 * one dashboard query covers them all), and without the misnamed `_total` gauges. Once per registry.
 */
export function registerProcessMetrics(registry: Registry): void {
  if (registered.has(registry)) return;
  registered.add(registry);
  collectDefaultMetrics({ register: registry });
  for (const name of MISNAMED_GAUGES) registry.removeSingleMetric(name);
}
