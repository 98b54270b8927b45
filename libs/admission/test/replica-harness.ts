// One gateway replica's admission, run as its own Node process by cross-replica.test.ts:
//   node --require tsx/cjs libs/admission/test/replica-harness.ts '<json options>'
// Prints `ready`, waits for `go` on stdin, fires its requests, prints one JSON result line, then waits for
// `exit`, releases everything, closes and exits.
import { createInterface } from 'node:readline';
import { Registry } from 'prom-client';
import { connectBus } from '@triad/bus/client';
import { createAdmission } from '@triad/admission';
import { ANONYMOUS } from '../src/identity';
import { type Admitted } from '../src/admission';

interface HarnessOptions {
  readonly natsUrl: string;
  readonly bucket: string;
  readonly replicaId: string;
  readonly model: string;
  readonly inputTokensPerUnit: number;
  readonly costPerRequest: number;
  readonly requests: number;
  /** Requests started together; the next wave starts when they are decided, so both replicas' traffic interleaves. */
  readonly wave: number;
  /** Shared clock: `base + (Date.now() - started)`, mid-window so the run cannot straddle a boundary. */
  readonly base: number;
  readonly started: number;
}

async function main(): Promise<void> {
  const opts = JSON.parse(process.argv[2]) as HarnessOptions;
  const bus = await connectBus({ servers: opts.natsUrl, name: opts.replicaId });
  const registry = new Registry();
  // Store failures are reported apart from the counts, so a failing run names its cause; everything logged goes to
  // stderr, which the test shows when a replica exits early.
  const storeErrors: string[] = [];
  const log =
    (level: string) =>
    (obj: object, msg?: string): void => {
      if (msg === 'rate-limit store unavailable') storeErrors.push(String((obj as { error?: unknown }).error));
      process.stderr.write(`${opts.replicaId} ${level}: ${msg ?? ''} ${JSON.stringify(obj)}\n`);
    };
  const logger = { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
  const admission = await createAdmission(
    // The test counts admissions exactly, so a store failure refuses (failMode closed) instead of admitting uncounted,
    // and it is reported. A store answer slower than the 1 s default on a loaded CI machine is not a failure of what
    // is tested here, so the timeout is generous.
    { rateLimit: { failMode: 'closed', store: { type: 'nats', bucket: opts.bucket }, storeTimeout: 15_000 } },
    { registry, bus, logger, replicaId: opts.replicaId, now: () => opts.base + (Date.now() - opts.started) },
  );
  const lines = createInterface({ input: process.stdin });
  const next = (): Promise<string> => new Promise((resolve) => lines.once('line', resolve));
  process.stdout.write('ready\n');
  await next();
  const rateLimit = { inputTokensPerUnit: opts.inputTokensPerUnit, unit: 'hour' as const };
  const pending: Promise<Awaited<ReturnType<typeof admission.admit>>>[] = [];
  for (let i = 0; i < opts.requests; i++) {
    pending.push(admission.admit({ identity: ANONYMOUS, model: opts.model, rateLimit, inputTokens: opts.costPerRequest, maxTokens: 0 }));
    if ((i + 1) % opts.wave === 0) await Promise.all(pending.slice(-opts.wave));
  }
  const results = await Promise.all(pending);
  const paths = (await registry.getSingleMetric('triad_admission_budget_path_total')?.get())?.values ?? [];
  const byPath = (p: string): number => paths.filter((v) => v.labels['path'] === p).reduce((s, v) => s + v.value, 0);
  const admitted = results.filter((r): r is Admitted => r.ok);
  const summary = {
    storeErrors,
    admitted: admitted.length,
    rejected: results.length - admitted.length,
    local: byPath('local'),
    store: byPath('store'),
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  await next();
  for (const a of admitted) a.release({ inputTokens: opts.costPerRequest, outputTokens: 0 });
  await admission.close();
  await bus.close();
  lines.close();
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
