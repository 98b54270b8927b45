// Development probe: a few sequential requests through the gateway with its access log kept, to see per-stage timings.
import { openSync, readFileSync } from 'node:fs';
import { startGatewayStack } from './gateway-stack';

async function main(): Promise<void> {
  const log = '/tmp/gwexp/gateway.log';
  const stack = await startGatewayStack({ gatewayLogFd: openSync(log, 'w'), gatewayEnv: { TRIAD_LOG_LEVEL: 'info' } });
  try {
    for (const model of ['agg', 'epd']) {
      for (let i = 0; i < 200; i++) {
        const t = performance.now();
        const res = await fetch(`${stack.gatewayUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, messages: [{ role: 'user', content: model === 'epd' ? [{ type: 'text', text: 'hi' }, { type: 'image_url', image_url: { url: 'https://x/cat.png' } }] : 'hi' }], max_tokens: 16 }) });
        await res.text();
        if (i % 50 === 0) process.stdout.write(`${model} ${i} ${(performance.now() - t).toFixed(3)} ms\n`);
      }
    }
  } finally {
    await stack.close();
  }
  const lines = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { kind?: string; model_name?: string; timings_ms?: Record<string, number> });
  for (const model of ['agg', 'epd']) {
    const t = lines.filter((l) => l.kind === 'access' && l.model_name === model).slice(100).map((l) => l.timings_ms as Record<string, number>);
    const med = (k: string) => { const v = t.map((x) => x[k] ?? 0).sort((a, b) => a - b); return v[Math.floor(v.length / 2)]; };
    process.stdout.write(`${model}: total ${med('total')} schedule ${med('schedule')} encode ${med('encode')} prefill ${med('prefill')} decode ${med('decode')}\n`);
  }
}
void main();
