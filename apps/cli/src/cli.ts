import { Command } from 'commander';
import { TRIAD_VERSION } from './version';

type CommandModule = { main(argv: readonly string[]): Promise<void> };

/**
 * Commands that own their flags (long-running services and tools), loaded on demand so `triad validate` does
 * not pay for the Kubernetes client or OpenTelemetry; the CLI hands each the rest of argv.
 */
const DELEGATED: Record<string, () => CommandModule> = {
  gateway: () => require('@triad/gateway') as typeof import('@triad/gateway'),
  scheduler: () => require('@triad/scheduler') as typeof import('@triad/scheduler'),
  'pod-watcher': () => require('@triad/pod-watcher') as typeof import('@triad/pod-watcher'),
  webhook: () => require('@triad/webhook') as typeof import('@triad/webhook'),
  'kv-indexer': () => require('@triad/kv-indexer') as typeof import('@triad/kv-indexer'),
  'sim-engine': () => require('./commands/sim-engine') as typeof import('./commands/sim-engine'),
  up: () => require('./commands/up') as typeof import('./commands/up'),
  trace: () => require('./commands/trace') as typeof import('./commands/trace'),
  // Internal (not in the help): the one process in which `triad up` hosts the engine sims of all loopback pods.
  '_sim-pods': () => require('./commands/up/sim-host') as typeof import('./commands/up/sim-host'),
};

const HELP_AFTER = `
Commands with their own flags (each takes --help):
  up             run the whole local stack (NATS, engine sims, pod-watcher, scheduler, gateway)
  gateway        OpenAI-compatible ingress and the E→P→D stage loop
  scheduler      scheduling service over NATS
  pod-watcher    discovery and metrics → NATS KV
  webhook        validating admission webhook for ModelServer, ModelRoute, ExternalModelProvider
  kv-indexer     engines' KV-cache events → NATS, for precise prefix-cache routing
  sim-engine     a simulated vLLM or SGLang engine in any disaggregated role
  trace          print a trace's span tree from a local OTLP receiver
`;

/**
 * Runs the `triad` CLI; resolves to the exit code for one-shot commands, or when a service stops. `--version`
 * answers on every command, the delegated services included, before anything is loaded or started.
 */
export async function runCli(argv: readonly string[], out: NodeJS.WritableStream = process.stdout): Promise<number | undefined> {
  const [first, ...rest] = argv;
  const delegated = first ? DELEGATED[first] : undefined;
  if (argv.includes('--version') && (delegated || first === 'validate' || first === 'crds')) {
    out.write(`${TRIAD_VERSION}\n`);
    return 0;
  }
  if (delegated) {
    await delegated().main(rest);
    return undefined;
  }
  let exitCode: number | undefined;
  const program = new Command('triad')
    .description('Triad: Kubernetes-native router for disaggregated (encode/prefill/decode) LLM inference')
    .version(TRIAD_VERSION, '-V, --version', 'print the version (also after any command)')
    .configureOutput({ writeOut: (text) => out.write(text) })
    .showHelpAfterError()
    .addHelpText('after', HELP_AFTER);
  program
    .command('validate')
    .description(
      'validate multi-document YAML (ModelServer, ModelRoute, ExternalModelProvider, Pod, Gateway, HTTPRoute, InferencePool); ' +
        'exit 0 when valid, 1 otherwise',
    )
    .argument('<files...>', 'YAML files')
    .option('--strict', 'warnings (fields the API server would drop or require, Gateway API features Triad does not serve) fail too')
    .action((files: string[], opts: { strict?: boolean }) => {
      // Loaded here, not at the top: every service process starts through this file, and the CRD schemas (zod)
      // would be built in it a second time beside the service bundle's own copy.
      const { validateCommand } = require('./commands/validate') as typeof import('./commands/validate');
      exitCode = validateCommand(files, out, { strict: opts.strict === true });
    });
  program
    .command('crds')
    .description('write the CustomResourceDefinitions generated from the zod schemas')
    .option('--out <dir>', 'output directory', 'infra/crds')
    .option('--check', 'exit 1 when the files in --out are stale instead of writing them')
    .action((opts: { out: string; check?: boolean }) => {
      const { crdsCommand } = require('./commands/crds') as typeof import('./commands/crds');
      exitCode = crdsCommand(opts, out);
    });
  program.exitOverride();
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (err) {
    // commander's own exits (--version, --help, a usage error it already printed) carry their exit code.
    const code = (err as { exitCode?: unknown }).exitCode;
    if (typeof code === 'number') return code;
    throw err;
  }
  return exitCode;
}
