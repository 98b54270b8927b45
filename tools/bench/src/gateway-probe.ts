// Development probe: sequential requests through the gateway with its access log kept, printing the median
// per-stage timings the gateway itself measured. Run: npx tsx tools/bench/src/gateway-probe.ts [count]
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGatewayStack } from './gateway-stack';

const TEXT = 'Describe the picture in one sentence, please.';

function body(model: string): string {
  const content =
    model === 'epd'
      ? [
          { type: 'text', text: TEXT },
          { type: 'image_url', image_url: { url: 'https://example.com/bench/cat.png' } },
        ]
      : TEXT;
  return JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 16 });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

async function main(): Promise<void> {
  const count = Number(process.argv[2] ?? 200);
  const dir = mkdtempSync(join(tmpdir(), 'triad-probe-'));
  const log = join(dir, 'gateway.log');
  const stack = await startGatewayStack({ gatewayLogFd: openSync(log, 'w'), gatewayEnv: { TRIAD_LOG_LEVEL: 'info' } });
  try {
    for (const model of ['agg', 'pd', 'epd']) {
      for (let i = 0; i < count; i++) {
        const res = await fetch(`${stack.gatewayUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body(model),
        });
        await res.text();
      }
    }
  } finally {
    await stack.close();
  }
  const lines = readFileSync(log, 'utf8')
    .trim()
    .split('\n')
    .map(
      (l) =>
        JSON.parse(l) as {
          kind?: string;
          model_name?: string;
          timings_ms?: Record<string, number>;
        },
    );
  for (const model of ['agg', 'pd', 'epd']) {
    // The second half only: the first requests warm the JIT and the connection pools.
    const timings = lines
      .filter((l) => l.kind === 'access' && l.model_name === model)
      .slice(count / 2)
      .map((l) => l.timings_ms ?? {});
    const m = (k: string) => median(timings.map((t) => t[k] ?? 0)).toFixed(3);
    process.stdout.write(
      `${model}: total ${m('total')} ms, schedule ${m('schedule')}, encode ${m('encode')}, prefill ${m('prefill')}, ` +
        `decode ${m('decode')}\n`,
    );
  }
  rmSync(dir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  process.stderr.write(`gateway probe: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
