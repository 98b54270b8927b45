import { Command, InvalidArgumentError, Option } from 'commander';
import type { FaultSpec, SimEngineOptions } from '@triad/engine-sim';
import {
  EcConnectorKindSchema,
  VllmKvConnectorSchema,
  type EcConnectorKind,
  type VllmKvConnector,
} from '@triad/engine-sim/connector-kinds';
import { durationArg } from '../arg-parsers';

/** `--fault MODE[:COUNT]`, e.g. `error500:3` or `hang`. */
function parseFault(value: string): FaultSpec {
  const [mode, count] = value.split(':');
  const modes = ['ok', 'error500', 'error429', 'hang', 'die-mid-stream', 'slow-first-byte', 'refuse'];
  if (!mode || !modes.includes(mode)) throw new InvalidArgumentError(`mode must be one of ${modes.join(', ')}`);
  if (count === undefined) return { mode: mode as FaultSpec['mode'] };
  const n = Number(count);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('COUNT must be a positive integer');
  return { mode: mode as FaultSpec['mode'], count: n };
}

function parseNonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be a non-negative integer');
  return n;
}

function parsePositiveInt(value: string): number {
  const n = parseNonNegativeInt(value);
  if (n === 0) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

/**
 * `--kv-events-config JSON` as vLLM and SGLang take it: `{"enable_kv_cache_events": true, "publisher": "zmq",
 * "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "buffer_steps": 10000, "topic": ""}`. vLLM
 * publishes only with `enable_kv_cache_events` true; SGLang whenever the config is given. `null` publisher = off.
 */
interface KvEventsConfig {
  enabled: boolean;
  endpoint: string;
  replayEndpoint?: string;
  bufferSteps?: number;
  topic?: string;
}

function parseKvEventsConfig(value: string): KvEventsConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(value);
  } catch (err) {
    throw new InvalidArgumentError(`not JSON: ${(err as Error).message}`);
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidArgumentError('must be a JSON object');
  const o = raw as Record<string, unknown>;
  const publisher = o['publisher'] ?? 'zmq';
  if (publisher !== 'zmq' && publisher !== 'null')
    throw new InvalidArgumentError(`publisher ${JSON.stringify(publisher)}: only zmq (or null)`);
  const str = (k: string): string | undefined => {
    const v = o[k];
    if (v !== undefined && v !== null && typeof v !== 'string') throw new InvalidArgumentError(`${k} must be a string`);
    return v ?? undefined;
  };
  const steps = o['buffer_steps'];
  if (steps !== undefined && !(Number.isInteger(steps) && (steps as number) > 0))
    throw new InvalidArgumentError('buffer_steps must be a positive integer');
  const replay = str('replay_endpoint');
  const topic = str('topic');
  return {
    enabled: publisher === 'zmq' && o['enable_kv_cache_events'] !== false,
    endpoint: str('endpoint') ?? 'tcp://*:5557',
    ...(replay ? { replayEndpoint: replay } : {}),
    ...(steps !== undefined ? { bufferSteps: steps as number } : {}),
    ...(topic !== undefined ? { topic } : {}),
  };
}

interface CliOptions {
  engine: 'vllm' | 'sglang';
  role: SimEngineOptions['role'];
  host: string;
  advertiseHost?: string;
  port?: number;
  model: string;
  latencyProfile: 'zero' | 'realistic';
  sharedEcDir?: string;
  admin?: boolean;
  fault?: FaultSpec;
  bootstrapPort: number;
  bootstrapTimeoutMs?: number;
  languageOnly?: boolean;
  encoderUrls?: string[];
  encoderBootstrapPort: number;
  encoderHealthCheckIntervalMs?: number;
  encoderHealthCheckTimeoutMs?: number;
  encoderEvictedTtlMs?: number;
  visionTower: boolean;
  loadBalanceMethod?: 'auto' | 'follow_bootstrap_room' | 'round_robin';
  lora?: string[];
  apiKey?: string;
  dpSize: number;
  maxModelLen?: number;
  runner: 'generate' | 'pooling';
  ecConnector: EcConnectorKind;
  enableMmEmbeds?: boolean;
  ecControlPort: number;
  ecPushWaitTimeoutMs?: number;
  kvEventsConfig?: KvEventsConfig;
  tokenizer?: string;
  blockSize?: number;
  pageSize?: number;
  prefixCachingHashAlgo?: 'sha256' | 'sha256_cbor' | 'xxhash' | 'xxhash_cbor';
  kvCapacityTokens?: number;
  kvConnector?: VllmKvConnector;
  kvLoadFailurePolicy?: 'fail' | 'recompute';
  kvLeaseMs?: number;
  sseKeepAliveIntervalMs?: number;
  lmcacheStore?: string;
}

function buildCommand(): Command {
  return new Command('triad sim-engine')
    .description('a simulated vLLM or SGLang engine in any disaggregated role (see docs/engine-sim.md)')
    .addOption(new Option('--engine <engine>', 'engine to simulate').choices(['vllm', 'sglang']).makeOptionMandatory())
    .addOption(new Option('--role <role>', 'disaggregated role').choices(['encode', 'prefill', 'decode', 'both']).default('both'))
    .option('--host <host>', 'listen address (any 127.x.y.z works)', '127.0.0.1')
    .option('--advertise-host <host>', 'address announced to peers (vLLM remote_host, SGLang prefill_host); default --host')
    .option('--port <port>', 'listen port, 0 picks a free one (default 8000 for vllm, 30000 for sglang)', parseNonNegativeInt)
    .option('--model <name>', 'served model name', 'sim-model')
    .addOption(new Option('--latency-profile <profile>', 'behaviour model').choices(['zero', 'realistic']).default('zero'))
    .option('--shared-ec-dir <dir>', 'vLLM shared-storage EC connector directory')
    .addOption(
      new Option('--ec-connector <kind>', 'vLLM EC connector: ECExampleConnector, ECCPUConnector (NIXL P2P), ECMooncakeConnector')
        .choices(EcConnectorKindSchema.options)
        .default('shared-storage'),
    )
    .option('--enable-mm-embeds', 'vLLM --enable-mm-embeds: accept image_embeds/audio_embeds/video_embeds parts')
    .option(
      '--ec-control-port <port>',
      'vLLM Mooncake EC consumer: control listener base port, DP rank r on port + r; 0 = free ports',
      parseNonNegativeInt,
      14579,
    )
    .option(
      '--ec-push-wait-timeout-ms <duration>',
      'vLLM Mooncake EC consumer: how long a request waits for a push (default 60s)',
      durationArg({ min: 1 }),
    )
    .option('--admin', 'serve /admin/fault, /admin/log and /admin/counters')
    .option('--fault <mode[:count]>', 'start with a fault: ok|error500|error429|hang|die-mid-stream|slow-first-byte|refuse', parseFault)
    .option(
      '--bootstrap-port <port>',
      'prefill bootstrap server port: SGLang always, vLLM with --kv-connector mooncake; 0 = free port',
      parseNonNegativeInt,
      8998,
    )
    .option('--bootstrap-timeout-ms <duration>', "SGLang decode: how long to wait for a room's KV (n>1 PD hangs)", durationArg({ min: 1 }))
    .option('--language-only', 'SGLang EPD prefill: encoder registry listener, calls /encode on its encoders')
    .option('--encoder-urls <url...>', 'SGLang language-only: encoders registered at start')
    .option('--encoder-bootstrap-port <port>', 'SGLang language-only: encoder registry listener port; 0 = free', parseNonNegativeInt, 8997)
    .option('--encoder-health-check-interval-ms <duration>', 'SGLang language-only: probe period (10s; 0 off)', durationArg({ min: 0 }))
    .option(
      '--encoder-health-check-timeout-ms <duration>',
      "SGLang language-only: one health probe's budget (default 2s)",
      durationArg({ min: 1 }),
    )
    .option(
      '--encoder-evicted-ttl-ms <duration>',
      'SGLang language-only: evicted encoders kept (10m; 0 = forever)',
      durationArg({ min: 0 }),
    )
    .option('--no-vision-tower', 'SGLang language-only: the model has no vision tower (multimodal requests fail without encoders)')
    .addOption(
      new Option('--load-balance-method <method>', 'SGLang DP rank choice without a pinned rank').choices([
        'auto',
        'follow_bootstrap_room',
        'round_robin',
      ]),
    )
    .option('--lora <name...>', 'LoRA adapter ids listed in /v1/models')
    .option(
      '--api-key <key>',
      'the engine --api-key: checked requests need Authorization: Bearer <key> (vLLM /v1 paths; SGLang all but health, metrics)',
    )
    .option('--dp-size <n>', 'data-parallel ranks (one metrics series each)', parsePositiveInt, 1)
    .option('--max-model-len <n>', 'context length', parsePositiveInt)
    .addOption(
      new Option('--runner <runner>', 'vLLM --runner: generate (chat, completions, responses) or pooling (/v1/embeddings)')
        .choices(['generate', 'pooling'])
        .default('generate'),
    )
    .option(
      '--kv-events-config <json>',
      'publish KV-cache events (ZMQ PUB + msgpack), the engines\' JSON: {"publisher":"zmq",' +
        '"endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558"}; needs --tokenizer',
      parseKvEventsConfig,
    )
    .option('--tokenizer <path>', "the model's tokenizer.json (or its directory): prompts are tokenized and hashed as the engine does")
    .option('--block-size <n>', 'vLLM: tokens per KV block (default 16)', parsePositiveInt)
    .option('--page-size <n>', 'SGLang: tokens per KV page (default 16)', parsePositiveInt)
    .addOption(
      new Option('--prefix-caching-hash-algo <algo>', 'vLLM block hash (PYTHONHASHSEED seeds it; default 0)').choices([
        'sha256',
        'sha256_cbor',
        'xxhash',
        'xxhash_cbor',
      ]),
    )
    .option('--kv-capacity-tokens <n>', 'KV pool size in tokens: the prefix cache evicts beyond it', parsePositiveInt)
    .addOption(
      new Option(
        '--kv-connector <kind>',
        "vLLM KV connector: NixlConnector (nixl), NixlPushConnector (nixl-push), upstream vLLM's MooncakeConnector (mooncake), " +
          "vllm-ascend's (mooncake-ascend), LMCacheConnectorV1 with a shared backend (lmcache); default nixl",
      ).choices(VllmKvConnectorSchema.options),
    )
    .addOption(
      new Option(
        '--kv-load-failure-policy <policy>',
        'vLLM decode: a failed remote KV load fails the request (default) or is recomputed',
      ).choices(['fail', 'recompute']),
    )
    .option(
      '--kv-lease-ms <ms>',
      'vLLM: how long a prefill holds KV for its decode, and a Mooncake/push decode waits (default 30000)',
      parsePositiveInt,
    )
    .option(
      '--sse-keep-alive-interval-ms <ms>',
      "vLLM --sse-keep-alive-interval (here in ms): an idle stream gets a ': keep-alive' comment (default off)",
      parsePositiveInt,
    )
    .option('--lmcache-store <name>', 'vLLM --kv-connector lmcache: the shared backend (same name, same store; in-process)');
}

/** The engine's `kvEvents` option from the flags; PYTHONHASHSEED seeds vLLM's block hashes as it does vLLM's. */
function kvEventOptions(o: CliOptions, program: Command, env: NodeJS.ProcessEnv = process.env): Pick<SimEngineOptions, 'kvEvents'> {
  const config = o.kvEventsConfig;
  if (!config?.enabled) return {};
  if (!o.tokenizer) program.error('error: --kv-events-config needs --tokenizer (the sim hashes token ids as the engine does)');
  const { enabled: _enabled, ...socket } = config;
  const blockSize = o.engine === 'vllm' ? o.blockSize : o.pageSize;
  return {
    kvEvents: {
      ...socket,
      tokenizer: o.tokenizer,
      ...(blockSize ? { blockSize } : {}),
      ...(o.prefixCachingHashAlgo ? { hashAlgo: o.prefixCachingHashAlgo } : {}),
      ...(env['PYTHONHASHSEED'] !== undefined ? { hashSeed: env['PYTHONHASHSEED'] } : {}),
    },
  };
}

/** `triad sim-engine`: runs one simulated engine until SIGTERM/SIGINT. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = buildCommand();
  program.parse([...argv], { from: 'user' });
  const o = program.opts<CliOptions>();
  const { createLogger, onShutdown } = require('@triad/runtime') as typeof import('@triad/runtime');
  const { startSimEngine } = require('@triad/engine-sim') as typeof import('@triad/engine-sim');
  const logger = createLogger({ service: 'sim-engine' });
  const handle = await startSimEngine({
    engine: o.engine,
    role: o.role,
    host: o.host,
    port: o.port ?? (o.engine === 'vllm' ? 8000 : 30000),
    model: o.model,
    latencyProfile: o.latencyProfile,
    admin: o.admin ?? false,
    // A vLLM prefill runs a Mooncake bootstrap server with --kv-connector mooncake (or when given a port); SGLang's always.
    ...(o.engine === 'sglang' || o.kvConnector === 'mooncake' || program.getOptionValueSource('bootstrapPort') === 'cli'
      ? { bootstrapPort: o.bootstrapPort }
      : {}),
    ...(o.kvConnector ? { kvConnector: o.kvConnector } : {}),
    ...(o.kvLoadFailurePolicy ? { kvLoadFailurePolicy: o.kvLoadFailurePolicy } : {}),
    ...(o.kvLeaseMs ? { kvLeaseMs: o.kvLeaseMs } : {}),
    ...(o.sseKeepAliveIntervalMs ? { sseKeepAliveIntervalMs: o.sseKeepAliveIntervalMs } : {}),
    ...(o.lmcacheStore ? { lmcacheStore: o.lmcacheStore } : {}),
    languageOnly: o.languageOnly ?? false,
    dataParallel: o.dpSize,
    logger,
    ...(o.advertiseHost ? { advertiseHost: o.advertiseHost } : {}),
    ...(o.sharedEcDir ? { sharedEcDir: o.sharedEcDir } : {}),
    ...(o.fault ? { fault: o.fault } : {}),
    ...(o.bootstrapTimeoutMs ? { bootstrapTimeoutMs: o.bootstrapTimeoutMs } : {}),
    ...(o.encoderUrls ? { encoderUrls: o.encoderUrls } : {}),
    ...(o.languageOnly ? { encoderBootstrapPort: o.encoderBootstrapPort, visionTower: o.visionTower } : {}),
    ...(o.encoderHealthCheckIntervalMs !== undefined ? { encoderHealthCheckIntervalMs: o.encoderHealthCheckIntervalMs } : {}),
    ...(o.encoderHealthCheckTimeoutMs !== undefined ? { encoderHealthCheckTimeoutMs: o.encoderHealthCheckTimeoutMs } : {}),
    ...(o.encoderEvictedTtlMs !== undefined ? { encoderEvictedTtlMs: o.encoderEvictedTtlMs } : {}),
    ...(o.loadBalanceMethod ? { loadBalanceMethod: o.loadBalanceMethod } : {}),
    ...(o.lora ? { loraAdapters: o.lora } : {}),
    ...(o.apiKey !== undefined ? { apiKey: o.apiKey } : {}),
    ...(o.maxModelLen ? { maxModelLen: o.maxModelLen } : {}),
    runner: o.runner,
    ecConnector: o.ecConnector,
    enableMmEmbeds: o.enableMmEmbeds ?? false,
    ...(o.ecConnector === 'mooncake' ? { ecControlPort: o.ecControlPort } : {}),
    ...(o.ecPushWaitTimeoutMs ? { ecPushWaitTimeoutMs: o.ecPushWaitTimeoutMs } : {}),
    ...kvEventOptions(o, program),
    ...(o.kvCapacityTokens ? { latency: { kvCapacityTokens: o.kvCapacityTokens } } : {}),
  });
  const { url, port, bootstrapPort, encoderBootstrapPort, ecControlAddresses, engine, role, model } = handle;
  logger.info(
    {
      url,
      port,
      bootstrapPort,
      encoderBootstrapPort,
      ecControlAddresses,
      engine,
      role,
      model,
      kvEvents: handle.kvEventEndpoints,
    },
    'sim-engine ready',
  );
  onShutdown(logger, () => handle.close(), { graceMs: 5_000 });
}
