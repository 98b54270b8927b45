import { Command } from 'commander';

/** `triad gateway`: parses flags (env equivalents) and prints the effective config. Filled in by the gateway issue. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = new Command('triad gateway')
    .option('--nats <url>', 'NATS server', process.env['TRIAD_NATS_URL'] ?? 'nats://127.0.0.1:4222')
    .option('--port <port>', 'HTTP port', process.env['TRIAD_PORT'] ?? '8080')
    .option('--metrics-port <port>', 'Prometheus/health port', process.env['TRIAD_METRICS_PORT'] ?? '9090');
  program.parse([...argv], { from: 'user' });
  process.stdout.write(`${JSON.stringify({ service: 'gateway', config: program.opts() })}\n`);
}
