// Child process of the scheduler benchmark: one scheduler replica (the real service), or an echo responder that
// answers schedule batches without scheduling (the NATS + JSON baseline). Run: tsx scheduler-worker.ts MODE ...
import { createServer } from 'node:http';
import { SCHEDULER_QUEUE_GROUP, Subjects } from '@triad/bus';
import { connectBus } from '@triad/bus/client';
import { createLogger } from '@triad/runtime';
import { startScheduler } from '@triad/scheduler';

async function runService(natsUrl: string, opsPort: number, configFile: string): Promise<void> {
  const logger = createLogger({ service: 'bench-scheduler', level: 'warn' });
  const service = await startScheduler({ natsUrl, metricsPort: opsPort, instanceId: 'bench', shutdownGraceMs: 5000, configFile, logger });
  process.once('SIGTERM', () => void service.close().then(() => process.exit(0)));
}

async function runEcho(natsUrl: string, opsPort: number): Promise<void> {
  const bus = await connectBus({ servers: natsUrl, name: 'bench-echo' });
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  bus.nc.subscribe(Subjects.schedule, {
    queue: SCHEDULER_QUEUE_GROUP,
    callback: (_err, msg) => {
      const batch = JSON.parse(dec.decode(msg.data)) as { requests: { id: string }[] };
      const decisions = batch.requests.map((r) => ({
        id: r.id,
        ok: true,
        mode: 'aggregated',
        encoders: [],
        attempts: [{ endpoint: { key: 'default.ms.pod-0', pod: 'pod-0', ip: '10.0.0.1', port: 8000 } }],
      }));
      msg.respond(enc.encode(JSON.stringify({ v: 1, decisions })));
    },
  });
  const ops = createServer((_req, res) => res.writeHead(200).end('ready')).listen(opsPort, '127.0.0.1');
  process.once('SIGTERM', () => {
    ops.close();
    void bus.close().then(() => process.exit(0));
  });
}

const [mode, natsUrl, port, configFile] = process.argv.slice(2);
const opsPort = Number(port);
const run = mode === 'echo' ? runEcho(natsUrl, opsPort) : runService(natsUrl, opsPort, configFile);
run.catch((err: unknown) => {
  process.stderr.write(`scheduler-worker: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
