import { Command } from 'commander';

/** `triad pod-watcher`: parses flags (env equivalents) and prints the effective config. Filled in by the pod-watcher issue. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = new Command('triad pod-watcher')
    .option('--nats <url>', 'NATS server', process.env['TRIAD_NATS_URL'] ?? 'nats://127.0.0.1:4222')
    .option('--source <source>', 'kube or file:PATH', process.env['TRIAD_SOURCE'] ?? 'kube');
  program.parse([...argv], { from: 'user' });
  process.stdout.write(`${JSON.stringify({ service: 'pod-watcher', config: program.opts() })}\n`);
}
