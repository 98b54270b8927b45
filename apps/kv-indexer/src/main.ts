import { main } from './cli';

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`triad kv-indexer: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
