import { parsePrometheusText } from '@triad/prom-text';
import { formatValue, MetricRegistry } from './exposition';

describe('MetricRegistry', () => {
  it('writes prometheus_client-style text: counters typed with _total, floats with a decimal point, cumulative buckets', () => {
    const r = new MetricRegistry();
    let live = 3;
    r.gauge('x:running', 'Running.', { model_name: 'm', engine: '0' }, () => live);
    r.counter('x:tokens_total', 'Tokens.', { model_name: 'm' }).inc(5);
    const h = r.histogram('x:ttft_seconds', 'TTFT.', { model_name: 'm' }, [0.1, 1]);
    h.observe(0.05);
    h.observeMany(0.5, 2);
    h.observe(5);
    live = 4;
    expect(r.render()).toBe(
      [
        '# HELP x:running Running.',
        '# TYPE x:running gauge',
        'x:running{model_name="m",engine="0"} 4.0',
        '# HELP x:tokens_total Tokens.',
        '# TYPE x:tokens_total counter',
        'x:tokens_total{model_name="m"} 5.0',
        '# HELP x:ttft_seconds TTFT.',
        '# TYPE x:ttft_seconds histogram',
        'x:ttft_seconds_bucket{model_name="m",le="0.1"} 1.0',
        'x:ttft_seconds_bucket{model_name="m",le="1.0"} 3.0',
        'x:ttft_seconds_bucket{model_name="m",le="+Inf"} 4.0',
        'x:ttft_seconds_count{model_name="m"} 4.0',
        'x:ttft_seconds_sum{model_name="m"} 6.05',
        '',
      ].join('\n'),
    );
    const { families, errors } = parsePrometheusText(r.render());
    expect(errors).toBe(0);
    expect(families.get('x:ttft_seconds')?.type).toBe('histogram');
  });

  it('escapes label values', () => {
    const r = new MetricRegistry();
    r.gauge('g', 'G.', { model_name: 'a"b\\c\nd' });
    expect(r.render()).toContain('g{model_name="a\\"b\\\\c\\nd"} 0.0');
  });

  it.each([
    [1, '1.0'],
    [0.25, '0.25'],
    [Infinity, '+Inf'],
    [NaN, 'NaN'],
  ])('formats %s as %s', (v, text) => {
    expect(formatValue(v)).toBe(text);
  });
});
