import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';

/** Where `triad up` gets its NATS server from. */
export type NatsChoice = { readonly kind: 'auto' } | { readonly kind: 'spawn' } | { readonly kind: 'url'; readonly url: string };

export type SimLatency = 'zero' | 'realistic';

export interface UpOptions {
  /** Absolute path of the multi-document YAML (ModelServers, ModelRoutes, Pods). */
  readonly configPath: string;
  /** Gateway data port. */
  readonly port: number;
  readonly nats: NatsChoice;
  readonly simLatency: SimLatency;
  /** Print the services' pino JSON lines as they are instead of the readable form. */
  readonly rawLogs: boolean;
  /** How long every service gets to become ready. */
  readonly readyTimeoutMs: number;
  /** How long a stopping service gets after SIGTERM before SIGKILL. */
  readonly stopTimeoutMs: number;
  /** The tokenizer the repository ships (KV events of the sims, precise prefix routing); absent outside a checkout. */
  readonly tokenizerDir?: string;
}

/** The small real tokenizer shipped in the repository for tests and the local stack. */
export const SHIPPED_TOKENIZER = 'infra/tokenizers/bert-base-uncased';

/** The demo config shipped in the repo, looked up from the working directory first, then from the checkout. */
export const DEFAULT_CONFIG = 'infra/local/cluster.yaml';

function intArg(name: string, min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

function natsArg(value: string): NatsChoice {
  if (value === 'auto') return { kind: 'auto' };
  if (value === 'spawn') return { kind: 'spawn' };
  if (!/^(nats|tls|ws|wss):\/\//.test(value)) throw new InvalidArgumentError('use auto, spawn or a nats://host:port URL');
  return { kind: 'url', url: value };
}

/**
 * Resolves `--config`: as given relative to the working directory, else (for the default only) relative to the
 * checkout that holds this CLI, so `npx triad up` works from any folder of the repo.
 */
export function resolveConfigPath(given: string | undefined, cwd: string, checkoutRoot: string): string {
  if (given !== undefined) return isAbsolute(given) ? given : resolve(cwd, given);
  const fromCwd = resolve(cwd, DEFAULT_CONFIG);
  return existsSync(fromCwd) ? fromCwd : resolve(checkoutRoot, DEFAULT_CONFIG);
}

/** Parses `triad up` flags; `--help` prints usage and exits through commander. */
export function parseUpOptions(argv: readonly string[], env: NodeJS.ProcessEnv, cwd: string, checkoutRoot: string): UpOptions {
  const program = new Command('triad up')
    .description('Run the whole local stack: NATS, engine sims for loopback pods, pod-watcher, scheduler and gateway')
    .option('--config <file>', `ModelServers, ModelRoutes and Pods (default ${DEFAULT_CONFIG})`)
    .option('--port <port>', 'gateway port', intArg('--port', 1, 65535), Number(env['TRIAD_PORT'] ?? 8080))
    .option(
      '--nats <auto|spawn|url>',
      'auto (default): TRIAD_NATS_URL, else a JetStream server on 127.0.0.1:4222, else start nats-server; spawn: always start a ' +
        'private one',
      natsArg,
    )
    .option('--sim-latency <profile>', 'engine sim latency profile: realistic or zero', 'realistic')
    .option('--raw-logs', "print the services' JSON log lines unchanged", false)
    .option('--ready-timeout <seconds>', 'how long the services get to become ready', intArg('--ready-timeout', 1, 3600), 90)
    .option(
      '--stop-timeout <seconds>',
      'how long a service gets to stop after SIGTERM before SIGKILL',
      intArg('--stop-timeout', 1, 600),
      10,
    )
    .showHelpAfterError();
  program.parse([...argv], { from: 'user' });
  const o = program.opts<{
    config?: string;
    port: number;
    nats?: NatsChoice;
    simLatency: string;
    rawLogs: boolean;
    readyTimeout: number;
    stopTimeout: number;
  }>();
  const simLatency = o.simLatency;
  if (simLatency !== 'zero' && simLatency !== 'realistic') program.error('--sim-latency must be zero or realistic');
  const explicitUrl = env['TRIAD_NATS_URL'];
  // TRIAD_NATS_URL is the documented way to point every Triad process at a server; it counts as --nats URL.
  const chosen: NatsChoice = o.nats ?? { kind: 'auto' };
  const nats: NatsChoice = chosen.kind === 'auto' && explicitUrl ? natsArg(explicitUrl) : chosen;
  return {
    configPath: resolveConfigPath(o.config, cwd, checkoutRoot),
    port: o.port,
    nats,
    simLatency: simLatency as SimLatency,
    rawLogs: o.rawLogs,
    readyTimeoutMs: o.readyTimeout * 1000,
    stopTimeoutMs: o.stopTimeout * 1000,
    ...(existsSync(resolve(checkoutRoot, SHIPPED_TOKENIZER, 'tokenizer.json'))
      ? { tokenizerDir: resolve(checkoutRoot, SHIPPED_TOKENIZER) }
      : {}),
  };
}
