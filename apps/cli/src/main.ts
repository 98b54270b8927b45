import { runCli } from './cli';

runCli(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`triad: ${err instanceof Error ? err.message : String(err)}\n`);
    // A service that failed to start (its port taken, say) may still hold what it opened before (the ops port,
    // NATS): exit rather than linger alive and never ready, which no liveness probe would restart. stderr is a
    // pipe or a file here, both written synchronously, so the message is out.
    process.exit(1);
  },
);
