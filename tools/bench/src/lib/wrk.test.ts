import { parseWrkOutput } from './wrk';
import { markdownTable } from './table';

const sample = `Running 5s test @ http://127.0.0.1:8000/v1/chat/completions
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.10ms  512.00us  12.00ms   90.00%
  Latency Distribution
     50%    1.95ms
     75%    2.20ms
     90%    2.60ms
     99%  850.00us
  75000 requests in 5.00s, 40.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  15000.12
Transfer/sec:      8.00MB
`;

describe('wrk output parsing', () => {
  it('reads throughput, percentiles in mixed units and error counts', () => {
    expect(parseWrkOutput(sample)).toEqual({ requests: 75000, rps: 15000.12, p50ms: 1.95, p90ms: 2.6, p99ms: 0.85, errors: 3, non2xx: 4 });
  });
  it('renders a markdown table', () => {
    expect(
      markdownTable(
        ['path', 'req/s'],
        [
          ['direct', 15000.12],
          ['gateway', 9.5],
        ],
      ),
    ).toBe('| path    | req/s  |\n|---------|--------|\n| direct  | 15,000 |\n| gateway | 9.50   |');
  });
});
