import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { durationArg, intArg } from '../../arg-parsers';

/** Where `triad up` gets its NATS server from. */
export type NatsChoice = { readonly kind: 'auto' } | { readonly kind: 'spawn' } | { readonly kind: 'url'; readonly url: string };

export type SimLatency = 'zero' | 'realistic';

export interface UpOptions {
  /** Absolute path of the multi-document YAML (ModelServers, ModelRoutes, Pods). */
  readonly configPath: string;
  /** Gateway data port. */
  readonly port: number;
  /**
   * The address the gateway and every service's ops port listen on: loopback unless told otherwise, so a local
   * stack is not reachable from the network by default.
   */
  readonly host: string;
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

/** The address a local stack listens on unless `--host` says otherwise. */
export const LOOPBACK = '127.0.0.1';

const portArg = intArg(1, 65535);

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
    .option('--port <port>', 'gateway port (TRIAD_PORT, default 8080)', portArg)
    .option(
      '--host <address>',
      'address the gateway and the ops ports listen on: 127.0.0.1 answers this machine only, 0.0.0.0 every interface',
      LOOPBACK,
    )
    .option(
      '--nats <auto|spawn|url>',
      'auto (default): TRIAD_NATS_URL, else the JetStream server on 127.0.0.1:4222 when it holds no Triad state, else a ' +
        'private nats-server; spawn: always a private one; a URL: that server, its Triad buckets included',
      natsArg,
    )
    .addOption(new Option('--sim-latency <profile>', 'engine sim latency profile').choices(['realistic', 'zero']).default('realistic'))
    .option('--raw-logs', "print the services' JSON log lines unchanged", false)
    .addOption(
      new Option('--ready-timeout <duration>', 'how long the services get to become ready, e.g. 90s or 2m (a bare number is seconds)')
        .argParser(durationArg({ bareUnit: 's', min: 1000, max: 3_600_000 }))
        .default(90_000, '90s'),
    )
    .addOption(
      new Option('--stop-timeout <duration>', 'how long a service gets to stop after SIGTERM before SIGKILL (a bare number is seconds)')
        .argParser(durationArg({ bareUnit: 's', min: 1000, max: 600_000 }))
        .default(10_000, '10s'),
    )
    // One line naming the problem (commander's `error: ...`), then where to read more: not the whole help.
    .showHelpAfterError('(run `triad up --help` for the options)');
  program.parse([...argv], { from: 'user' });
  const o = program.opts<{
    config?: string;
    port?: number;
    host: string;
    nats?: NatsChoice;
    simLatency: SimLatency;
    rawLogs: boolean;
    readyTimeout: number;
    stopTimeout: number;
  }>();
  let port = o.port ?? 8080;
  if (o.port === undefined && env['TRIAD_PORT']) {
    try {
      port = portArg(env['TRIAD_PORT']);
    } catch (err) {
      program.error(`error: TRIAD_PORT '${env['TRIAD_PORT']}': ${(err as Error).message}`);
    }
  }
  const explicitUrl = env['TRIAD_NATS_URL'];
  // TRIAD_NATS_URL is the documented way to point every Triad process at a server; it counts as --nats URL.
  let nats: NatsChoice = o.nats ?? { kind: 'auto' };
  if (nats.kind === 'auto' && explicitUrl) {
    if (!/^(nats|tls|ws|wss):\/\//.test(explicitUrl))
      program.error(`error: TRIAD_NATS_URL '${explicitUrl}': expected a nats://host:port URL`);
    nats = { kind: 'url', url: explicitUrl };
  }
  return {
    configPath: resolveConfigPath(o.config, cwd, checkoutRoot),
    port,
    host: o.host,
    nats,
    simLatency: o.simLatency,
    rawLogs: o.rawLogs,
    readyTimeoutMs: o.readyTimeout,
    stopTimeoutMs: o.stopTimeout,
    ...(existsSync(resolve(checkoutRoot, SHIPPED_TOKENIZER, 'tokenizer.json'))
      ? { tokenizerDir: resolve(checkoutRoot, SHIPPED_TOKENIZER) }
      : {}),
  };
}
