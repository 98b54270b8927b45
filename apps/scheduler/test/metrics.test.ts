import { SchedulerMetrics } from '../src/metrics';

describe('SchedulerMetrics.decided', () => {
  it('counts decisions per mode and outcome, errors per code, and observes each latency once', async () => {
    const metrics = new SchedulerMetrics();
    metrics.decided('epd', 'ok', 0.0002);
    metrics.decided('epd', 'ok', 0.0004);
    metrics.decided('pd', 'ok', 0.002);
    metrics.decided('epd', 'SCHED_NO_CANDIDATES', 0);
    const text = await metrics.registry.metrics();
    expect(text).toContain('triad_scheduler_decisions_total{mode="epd",outcome="ok"} 2\n');
    expect(text).toContain('triad_scheduler_decisions_total{mode="pd",outcome="ok"} 1\n');
    expect(text).toContain('triad_scheduler_decisions_total{mode="epd",outcome="SCHED_NO_CANDIDATES"} 1\n');
    expect(text).toContain('triad_scheduler_errors_total{code="SCHED_NO_CANDIDATES"} 1\n');
    expect(text).toContain('triad_scheduler_decision_duration_seconds_count{mode="epd"} 3\n');
    expect(text).toContain('triad_scheduler_decision_duration_seconds_bucket{le="0.00025",mode="epd"} 2\n');
    expect(text).toContain('triad_scheduler_decision_duration_seconds_count{mode="pd"} 1\n');
  });

  it('hands each scrape the totals since the start: a scrape neither resets nor doubles them', async () => {
    const metrics = new SchedulerMetrics();
    metrics.decided('epd', 'ok', 0.0002);
    await metrics.registry.metrics();
    metrics.decided('epd', 'ok', 0.0002);
    metrics.decided('pd', 'ok', 0.0002);
    await metrics.registry.metrics();
    const text = await metrics.registry.metrics();
    expect(text).toContain('triad_scheduler_decisions_total{mode="epd",outcome="ok"} 2\n');
    expect(text).toContain('triad_scheduler_decisions_total{mode="pd",outcome="ok"} 1\n');
  });
});
