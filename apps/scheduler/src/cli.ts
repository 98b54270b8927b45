import { Command } from 'commander';

/** `triad scheduler`: parses flags (env equivalents) and prints the effective config. Filled in by the scheduler issue. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = new Command('triad scheduler')
    .option('--nats <url>', 'NATS server', process.env['TRIAD_NATS_URL'] ?? 'nats://127.0.0.1:4222')
    .option('--config <file>', 'scheduler config YAML', process.env['TRIAD_SCHEDULER_CONFIG']);
  program.parse([...argv], { from: 'user' });
  process.stdout.write(`${JSON.stringify({ service: 'scheduler', config: program.opts() })}\n`);
}
