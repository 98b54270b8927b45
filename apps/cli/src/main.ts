import { runCli } from './cli';

runCli(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`triad: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
