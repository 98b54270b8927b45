/**
 * Start-up without NATS: the time from nats-server accepting clients to a gateway that was started before it
 * answering `/readyz` 200. The gateway (`triad gateway`, its own process) retries NATS with a backoff bounded at
 * 2 s, so the figure depends on where in that cycle NATS appears: each round waits `--wait` seconds after the
 * gateway logged that it waits (so the backoff has reached its bound), then starts nats-server. The baseline row
 * is the same gateway started while NATS is already up (spawn to ready): the cost of getting ready at all.
 *
 *   npx tsx tools/bench/src/nats-startup.ts [--rounds 10] [--wait 5]
 *   npx tsx tools/bench/src/nats-startup.ts --smoke      # 2 rounds, 1 s wait
 */
import { freePort, spawnTriad, startNatsServer, waitFor, type TriadChild, parseToolArgs } from '@triad/testing';
import { markdownTable } from './lib/table';
import { median } from './lib/stats';

const { values: args } = parseToolArgs({
  options: {
    rounds: { type: 'string' },
    wait: { type: 'string' },
    smoke: { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(args.rounds ?? (args.smoke ? 2 : 10));
const WAIT_MS = Number(args.wait ?? (args.smoke ? 1 : 5)) * 1000;

const ready = async (opsPort: number) => (await fetch(`http://127.0.0.1:${opsPort}/readyz`).catch(() => undefined))?.status === 200;

/** Spawns `triad gateway` against `natsUrl` on free ports. */
async function spawnGateway(natsUrl: string): Promise<{ child: TriadChild; opsPort: number }> {
  const opsPort = await freePort();
  const args = ['gateway', '--nats', natsUrl, '--host', '127.0.0.1', '--port', '0', '--metrics-port', String(opsPort)];
  args.push('--drain-timeout-ms', '500');
  const child = spawnTriad(args, { TRIAD_LOG_LEVEL: 'info' });
  return { child, opsPort };
}

/** Milliseconds from nats-server accepting clients to the gateway started before it being ready. */
async function natsAppears(): Promise<number> {
  const port = await freePort();
  const { child, opsPort } = await spawnGateway(`nats://127.0.0.1:${port}`);
  let nats: Awaited<ReturnType<typeof startNatsServer>> | undefined;
  try {
    await waitFor(() => child.output().includes('"msg":"waiting for NATS at'), { what: 'gateway waiting for NATS', timeoutMs: 60_000 });
    await new Promise((r) => setTimeout(r, WAIT_MS));
    nats = await startNatsServer({ port });
    const appeared = performance.now();
    await waitFor(() => ready(opsPort), { what: 'gateway ready', timeoutMs: 60_000, intervalMs: 5 });
    return performance.now() - appeared;
  } finally {
    await child.stop();
    await nats?.close();
  }
}

/** Milliseconds from spawning the gateway to ready, NATS already up. */
async function natsFirst(): Promise<number> {
  const nats = await startNatsServer();
  const started = performance.now();
  const { child, opsPort } = await spawnGateway(nats.url);
  try {
    await waitFor(() => ready(opsPort), { what: 'gateway ready', timeoutMs: 60_000, intervalMs: 5 });
    return performance.now() - started;
  } finally {
    await child.stop();
    await nats.close();
  }
}

async function main(): Promise<void> {
  const later: number[] = [];
  const first: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    later.push(await natsAppears());
    first.push(await natsFirst());
    const [l, f] = [later.at(-1)?.toFixed(0), first.at(-1)?.toFixed(0)];
    process.stderr.write(`round ${i + 1}/${ROUNDS}: NATS appears → ready ${l} ms, spawn → ready ${f} ms\n`);
  }
  const row = (name: string, xs: number[]) => [name, String(ROUNDS), median(xs), Math.min(...xs), Math.max(...xs)];
  const title = `Gateway start-up and NATS (${ROUNDS} rounds, NATS started ${WAIT_MS / 1000} s after the gateway began waiting)`;
  process.stdout.write(`\n${title}\n\n`);
  process.stdout.write(
    `${markdownTable(
      ['measure', 'rounds', 'median ms', 'min ms', 'max ms'],
      [row('NATS appears → gateway /readyz 200', later), row('baseline: spawn → /readyz 200, NATS already up', first)],
    )}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
