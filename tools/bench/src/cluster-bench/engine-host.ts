// Child process of the cluster benchmark (cluster-bench.ts): hosts the benchmark's engines — engine-sims running the
// vLLM V1 engine-core model — in one process, each on its own loopback address as pods in a cluster. Argument (the
// last one): JSON {model, port, engines: [{host, role, latency, engineCore, ecConnector?}]}. Prints one JSON line
// {"msg":"engines ready"} when every engine listens, then every second {"msg":"engine host","eventLoopP99Ms",...}
// (this process's event-loop delay, so the benchmark can tell when the stand-in engines are late). Stops on SIGTERM.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  startSimEngine,
  type EngineCoreOptions,
  type KvEventsSimOptions,
  type LatencyOverrides,
  type SimEngineHandle,
  type SimRole,
} from '@triad/engine-sim';

export interface HostedEngine {
  readonly host: string;
  readonly role: SimRole;
  readonly latency: LatencyOverrides;
  readonly engineCore: EngineCoreOptions;
  readonly ecConnector?: 'nixl';
  /** The engine publishes vLLM KV events from its engine core's block pool. */
  readonly kvEvents?: KvEventsSimOptions;
}

export interface EngineHostSpec {
  readonly model: string;
  readonly port: number;
  readonly engines: readonly HostedEngine[];
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[process.argv.length - 1]) as EngineHostSpec;
  const logger = {
    info: () => undefined,
    debug: () => undefined,
    warn: (obj: object, msg?: string) => process.stderr.write(`${msg ?? ''} ${JSON.stringify(obj)}\n`),
    error: (obj: object, msg?: string) => process.stderr.write(`${msg ?? ''} ${JSON.stringify(obj)}\n`),
  };
  const handles: SimEngineHandle[] = [];
  for (const e of spec.engines) {
    handles.push(
      await startSimEngine({
        engine: 'vllm',
        role: e.role,
        host: e.host,
        port: spec.port,
        model: spec.model,
        latencyProfile: 'realistic',
        latency: e.latency,
        engineCore: e.engineCore,
        admin: true,
        logger,
        requestLogLimit: 0,
        nixlSideChannel: 'in-process',
        enableMmEmbeds: true,
        ...(e.ecConnector ? { ecConnector: e.ecConnector } : {}),
        ...(e.kvEvents ? { kvEvents: e.kvEvents } : {}),
      }),
    );
  }
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  process.stdout.write(`${JSON.stringify({ msg: 'engines ready', engines: handles.map((h) => h.url) })}\n`);
  const report = setInterval(() => {
    process.stdout.write(
      `${JSON.stringify({ msg: 'engine host', eventLoopP99Ms: delay.percentile(99) / 1e6, eventLoopMaxMs: delay.max / 1e6 })}\n`,
    );
    delay.reset();
  }, 1000);
  const stop = () => {
    clearInterval(report);
    void Promise.all(handles.map((h) => h.close())).finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`engine host: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
