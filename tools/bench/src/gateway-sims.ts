// Child process of the gateway benchmark (tools/bench/src/gateway-stack.ts): hosts every engine-sim of the
// stack in one process, as `triad up` does, so the stand-in engines cost what one engine process costs instead of
// seven processes' wake-ups on a 2-core machine. Argument (the last one): JSON
// {model, nixl: 'http' | 'in-process', sims: [{name, role, port, profile, ecConnector?, sharedEcDir?}]}. Every sim
// accepts *_embeds parts (the newest reference proxy sends them). The request log is off (it keeps every body, which
// a long run pays for in garbage collection). Stops on SIGTERM/SIGINT.
import { startSimEngine, type EcConnectorKind, type SimEngineHandle, type SimEngineOptions, type SimRole } from '@triad/engine-sim';

interface HostedSim {
  readonly name: string;
  readonly role: SimRole;
  readonly port: number;
  readonly profile: 'zero' | 'realistic';
  readonly ecConnector?: EcConnectorKind;
  readonly sharedEcDir?: string;
}

async function main(): Promise<void> {
  const { model, nixl, sims } = JSON.parse(process.argv[process.argv.length - 1]) as {
    model: string;
    nixl: SimEngineOptions['nixlSideChannel'];
    sims: HostedSim[];
  };
  const handles: SimEngineHandle[] = [];
  const logger = {
    info: () => undefined,
    debug: () => undefined,
    warn: (obj: object, msg?: string) => process.stderr.write(`${msg ?? ''} ${JSON.stringify(obj)}\n`),
    error: (obj: object, msg?: string) => process.stderr.write(`${msg ?? ''} ${JSON.stringify(obj)}\n`),
  };
  for (const s of sims) {
    handles.push(
      await startSimEngine({
        engine: 'vllm',
        role: s.role,
        host: '127.0.0.1',
        port: s.port,
        model,
        latencyProfile: s.profile,
        logger,
        requestLogLimit: 0,
        nixlSideChannel: nixl,
        enableMmEmbeds: true,
        ...(s.ecConnector ? { ecConnector: s.ecConnector } : {}),
        ...(s.sharedEcDir ? { sharedEcDir: s.sharedEcDir } : {}),
      }),
    );
  }
  const stop = () => {
    void Promise.all(handles.map((h) => h.close())).finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`gateway sims: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
