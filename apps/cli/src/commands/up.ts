import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { renderReadyBanner } from './up/banner';
import { describeExit } from './up/managed-child';
import { parseUpOptions, DEFAULT_CONFIG } from './up/options';
import { startStack, type RunningStack } from './up/stack';
import { StartupError } from './up/startup-error';

/** The checkout that holds this CLI (for the default config when run from another folder), if any. */
function checkoutRoot(): string {
  for (let dir = __dirname; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, DEFAULT_CONFIG))) return dir;
  }
  return process.cwd();
}

/** Resolves on the first SIGINT/SIGTERM/SIGHUP; repeats within a second are the same Ctrl-C delivered twice. */
function stopSignal(onForce: () => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let first: number | undefined;
    const handler = (signal: NodeJS.Signals) => {
      // `npm start` forwards the terminal's SIGINT, so one Ctrl-C can arrive twice; only a later one forces.
      if (first === undefined) {
        first = Date.now();
        resolve(signal);
      } else if (Date.now() - first > 1000) {
        onForce();
      }
    };
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, handler);
  });
}

/**
 * `triad up [--config FILE] [--port P]`: runs the whole local stack until Ctrl-C, then stops every service and
 * leaves nothing behind. Start-up problems the user can fix end with a plain message and exit code 1.
 */
export async function main(argv: readonly string[]): Promise<void> {
  const out = process.stdout;
  const options = parseUpOptions(argv, process.env, process.cwd(), checkoutRoot());
  let stack: RunningStack | undefined;
  let force = false;
  const interrupt = new AbortController();
  const signal = stopSignal(() => {
    force = true;
    out.write('triad up: forcing: killing every service now\n');
    stack?.kill();
  });
  void signal.then(() => interrupt.abort());
  try {
    stack = await startStack(options, {
      cliEntry: process.argv[1] ?? '',
      out,
      env: process.env,
      color: out.isTTY === true,
      abort: interrupt.signal,
    });
  } catch (err) {
    if (err instanceof StartupError) {
      process.stderr.write(`error: triad up: ${err.message}\n`);
      // 130 is the shell's code for "stopped by Ctrl-C"; anything else that stops the start is a failure.
      process.exitCode = interrupt.signal.aborted ? 130 : 1;
      process.exit();
    }
    throw err;
  }

  out.write(renderReadyBanner(stack, process.uptime() * 1000, process.cwd()));
  const end = await Promise.race([signal.then((s) => ({ signal: s })), stack.crashed]);
  if ('signal' in end) {
    out.write(`triad up: ${end.signal}: stopping every service${force ? '' : ' (Ctrl-C again to force)'}\n`);
  } else {
    process.stderr.write(
      `triad up: ${end.child.name} ${describeExit(end.exit)}; stopping the stack. Its last lines:\n  ` +
        `${end.child.lastLines().join('\n  ')}\n`,
    );
    process.exitCode = 1;
  }
  await stack.stop();
  out.write('triad up: stopped; no service left running\n');
  // Signal listeners and the terminal stay attached otherwise; everything is cleaned up, so leave now.
  process.exit();
}
