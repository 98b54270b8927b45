// Bytes the gateway sends to P and D for one 1-image vLLM EPD request, without and with the metadata rewrite
// (ModelServer ecConnector.enableMmEmbeds): the vLLM EPD connector runs against in-process engine-sims (NIXL EC
// connector, --enable-mm-embeds), every leg forwarded to its sim; the legs' bodies are measured as sent.
// Run: npx tsx tools/bench/src/epd-bytes.ts [--image-kib 256]
import type { Decision } from '@triad/bus';
import { ConnectorRegistry } from '@triad/connectors';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { proxyRequest, serverProfile } from '@triad/request/testing';
import { ForwardingRunner } from './lib/forwarding-runner';
import { markdownTable } from './lib/table';
import { parseToolArgs } from '@triad/testing';

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';

const refOf = (pod: string, sim: SimEngineHandle) => ({ key: `default.epd.${pod}`, pod, ip: sim.host, port: sim.port });

async function main(): Promise<void> {
  const { values } = parseToolArgs({ options: { 'image-kib': { type: 'string', default: '256' } } });
  const kib = Number(values['image-kib']);
  const sims: SimEngineHandle[] = [];
  try {
    const start = async (role: 'encode' | 'prefill' | 'decode') => {
      const sim = await startSimEngine({
        engine: 'vllm',
        role,
        model: MODEL,
        ecConnector: 'nixl',
        enableMmEmbeds: true,
        requestLogLimit: 0,
      });
      sims.push(sim);
      return sim;
    };
    const [e, p, d] = [await start('encode'), await start('prefill'), await start('decode')];
    const decision: Decision = {
      id: 'r',
      ok: true,
      mode: 'epd',
      attempts: [{ endpoint: refOf('d', d), prefill: refOf('p', p) }],
      encoders: [{ item: 0, endpoint: refOf('e', e), alternates: [], affinity: false }],
    };
    const data = `data:image/png;base64,${Buffer.alloc(kib * 768, 7).toString('base64')}`;
    const images: [string, string][] = [
      [`data URL (${kib} KiB base64)`, data],
      ['https URL', 'https://example.com/images/cat.png'],
    ];
    const rows: (string | number)[][] = [];
    const connector = new ConnectorRegistry().get('vllm-epd');
    for (const [label, url] of images) {
      const body = {
        model: MODEL,
        max_tokens: 16,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Describe the picture.' },
              { type: 'image_url', image_url: { url } },
            ],
          },
        ],
      };
      const client = Buffer.byteLength(JSON.stringify(body));
      for (const mmEmbeds of [false, true]) {
        const server = serverProfile({
          name: 'epd',
          mode: 'epd',
          connector: 'vllm-epd',
          relayKvParams: true,
          ec: { connector: 'nixl', push: false, mmEmbeds, maxEncoderBatch: 16, reencodeAttempts: 1 },
        });
        const ctx = proxyRequest({ body, server, decision });
        const run = new ForwardingRunner();
        await connector.prepare?.(ctx, run);
        await connector.attempt(ctx, decision.attempts[0], 0, run);
        const localEncodes = p.counters()['localEncodes'] ?? 0;
        rows.push([
          label,
          mmEmbeds ? 'after (image_embeds reference)' : 'before (raw media)',
          client,
          run.bytes['encode'],
          run.bytes['prefill'],
          run.bytes['decode'],
          run.bytes['prefill'] + run.bytes['decode'],
          String(localEncodes),
        ]);
      }
    }
    console.log(`\nBytes sent per 1-image vLLM EPD request (E→P→D, NIXL EC connector), request bodies only\n`);
    console.log(
      markdownTable(['image', 'P/D bodies', 'client body', 'to E', 'to P', 'to D', 'to P + D', 'prefill local encodes (cumulative)'], rows),
    );
  } finally {
    await Promise.all(sims.map((s) => s.close()));
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
