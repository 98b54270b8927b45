import { runCli } from './cli';

/** commander's own errors (exitOverride): it has already printed `error: ...` and knows the exit code. */
function commanderExit(err: unknown): number | undefined {
  const e = err as { code?: unknown; exitCode?: unknown };
  return typeof e.code === 'string' && e.code.startsWith('commander.') && typeof e.exitCode === 'number' ? e.exitCode : undefined;
}

runCli(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err: unknown) => {
    const exitCode = commanderExit(err);
    // One line that starts with `error:` (as commander's own), whatever failed: bad settings, a missing file...
    if (exitCode === undefined) process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    // A service that failed to start (its port taken, say) may still hold what it opened before (the ops port,
    // NATS): exit rather than linger alive and never ready, which no liveness probe would restart. stderr is a
    // pipe or a file here, both written synchronously, so the message is out.
    process.exit(exitCode ?? 1);
  },
);
