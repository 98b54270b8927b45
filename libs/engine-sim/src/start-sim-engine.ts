import { createServer } from 'node:http';
import { registerAdminRoutes } from './admin-routes';
import { listen } from './http/listen';
import { Router } from './http/router';
import {
  EcConnectorKindSchema,
  EngineKindSchema,
  FaultSpecSchema,
  KvEventsSimOptionsSchema,
  SimRoleSchema,
  VllmKvConnectorSchema,
  type SimEngineHandle,
  type SimEngineOptions,
} from './options';
import { coreBlockKeys } from './kv-events/core-kv-events';
import { SimKvEvents } from './kv-events/sim-kv-events';
import { SimContext } from './sim-context';
import { BootstrapServer } from './bootstrap/bootstrap-server';
import { resolveLoadBalanceMethod } from './sglang/dp-rank';
import { registerSglangRoutes } from './sglang/sglang-routes';
import { offerInProcessPulls } from './vllm/kv-side-channel';
import { registerVllmRoutes } from './vllm/vllm-routes';

/** uvicorn's keep-alive timeout, which both engines run behind. */
const KEEP_ALIVE_MS = 5_000;

function validate(opts: SimEngineOptions): void {
  EngineKindSchema.parse(opts.engine);
  SimRoleSchema.parse(opts.role);
  if (opts.fault) FaultSpecSchema.parse(opts.fault);
  if (opts.languageOnly && !(opts.engine === 'sglang' && (opts.role === 'prefill' || opts.role === 'both'))) {
    throw new Error('languageOnly needs engine sglang and role prefill (EPD) or both (E+PD)');
  }
  if (opts.dataParallel !== undefined && (!Number.isInteger(opts.dataParallel) || opts.dataParallel < 1))
    throw new Error('dataParallel must be a positive integer');
  if (opts.ecConnector !== undefined) EcConnectorKindSchema.parse(opts.ecConnector);
  const port = opts.ecControlPort;
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port + (opts.dataParallel ?? 1) > 65536)) {
    throw new Error('ecControlPort must be 0 or a port that leaves room for one port per DP rank');
  }
  if (opts.ecPushWaitTimeoutMs !== undefined && !(opts.ecPushWaitTimeoutMs > 0)) throw new Error('ecPushWaitTimeoutMs must be positive');
  if (opts.kvEvents !== undefined) KvEventsSimOptionsSchema.parse(opts.kvEvents);
  if (opts.kvConnector !== undefined) {
    VllmKvConnectorSchema.parse(opts.kvConnector);
    if (opts.engine !== 'vllm') throw new Error('kvConnector is a vLLM option');
  }
}

/**
 * SGLang prefills always run one; a vLLM prefill (or `both`) with upstream vLLM's Mooncake connector does (its
 * `MooncakeBootstrapServer`), and any vLLM prefill given a bootstrap port.
 */
function wantsBootstrap(opts: SimEngineOptions): boolean {
  if (opts.role !== 'prefill' && opts.role !== 'both') return false;
  if (opts.engine === 'sglang') return opts.role === 'prefill';
  return opts.kvConnector === 'mooncake' || (opts.bootstrapPort !== undefined && opts.kvConnector === undefined);
}

/**
 * Starts a simulated vLLM or SGLang engine in one disaggregated role on a real socket. Everything it owns is
 * per instance, so many simulators can share one process (the local stack runs them all in one).
 */
export async function startSimEngine(opts: SimEngineOptions): Promise<SimEngineHandle> {
  validate(opts);
  const ctx = new SimContext(opts);
  const router = new Router({
    engine: ctx.engine,
    log: ctx.log,
    faults: ctx.faults,
    counters: ctx.counters,
    clock: ctx.clock,
    logger: ctx.logger,
    ...(opts.apiKey !== undefined ? { apiKey: opts.apiKey } : {}),
  });
  const bootstrap = wantsBootstrap(opts)
    ? await BootstrapServer.start({
        host: ctx.host,
        port: opts.bootstrapPort ?? 0,
        dpSize: ctx.ranks.length,
        engineIds: ctx.ranks.map((r) => (r.index === 0 ? ctx.engineId : `${ctx.engineId}-dp${r.index}`)),
        workerAddr: () => `tcp://${ctx.advertiseHost.includes(':') ? `[${ctx.advertiseHost}]` : ctx.advertiseHost}:${ctx.port}`,
        ...(ctx.engine === 'vllm' ? { leaseMs: opts.kvLeaseMs ?? 30_000 } : {}),
        ...(ctx.engine === 'sglang' ? { loadBalanceMethod: resolveLoadBalanceMethod(opts.loadBalanceMethod, ctx.role) } : {}),
        onHandoff: (key) => {
          if (key.startsWith('xfer:')) ctx.counters.inc('kvPullsServed');
        },
      })
    : undefined;
  const vllm = ctx.engine === 'vllm' ? registerVllmRoutes(router, ctx, bootstrap) : undefined;
  const sglang = vllm === undefined ? registerSglangRoutes(router, ctx, bootstrap) : undefined;
  if (opts.admin) registerAdminRoutes(router, ctx);
  let kvEvents: SimKvEvents | undefined;

  const server = createServer({ keepAliveTimeout: KEEP_ALIVE_MS }, router.listener);
  try {
    if (opts.kvEvents) {
      kvEvents = await SimKvEvents.start(ctx.engine, opts.kvEvents, ctx.host, ctx.model, ctx.ranks, ctx.latency.kvCapacityTokens);
      ctx.restartKvCache = () => kvEvents?.restart();
      const hashing = kvEvents.hashing;
      ctx.tokenizePrompt = (body) => hashing.tokenize(body);
      ctx.coreBlockKeys = (prompt, layoutHashes) => coreBlockKeys(hashing, prompt, layoutHashes);
    }
    ctx.port = await listen(server, ctx.host, opts.port ?? 0);
    await vllm?.ec.start();
    await sglang?.start();
  } catch (err) {
    await new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
    await bootstrap?.close();
    await kvEvents?.close();
    await ctx.close();
    throw err;
  }
  const withdrawPulls =
    vllm !== undefined && opts.nixlSideChannel === 'in-process' && (ctx.role === 'prefill' || ctx.role === 'both')
      ? offerInProcessPulls(ctx, vllm.kv)
      : undefined;

  let closing: Promise<void> | undefined;
  return {
    url: ctx.url,
    host: ctx.host,
    port: ctx.port,
    ...(bootstrap ? { bootstrapPort: bootstrap.port } : {}),
    ...(vllm?.ec.controlAddresses ? { ecControlAddresses: vllm.ec.controlAddresses } : {}),
    ...(sglang?.encoderBootstrapPort !== undefined ? { encoderBootstrapPort: sglang.encoderBootstrapPort } : {}),
    engine: ctx.engine,
    role: ctx.role,
    model: ctx.model,
    requests: () => ctx.log.list(),
    clearRequests: () => ctx.log.clear(),
    setFault: (fault) => ctx.faults.set(FaultSpecSchema.parse(fault)),
    counters: () => ctx.counters.snapshot(),
    kvHeld: () => ctx.kvHeld(),
    stalledStreams: () => ctx.stalls.snapshot(),
    ...(kvEvents ? { kvEventEndpoints: kvEvents.endpoints } : {}),
    restartKvCache: () => ctx.restartKvCache(),
    close: () =>
      (closing ??= (async () => {
        withdrawPulls?.();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await sglang?.close();
        await bootstrap?.close();
        vllm?.kvSim.close?.();
        await vllm?.ec.close();
        await kvEvents?.close();
        await ctx.close();
      })()),
  };
}
