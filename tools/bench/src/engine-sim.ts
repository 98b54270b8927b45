/**
 * The ceiling of one zero-profile simulated engine (the figure gateway benchmarks compare against): req/s and
 * latency under wrk, non-streamed and 64-token streams, at 1 and 32 connections, next to a bare node:http
 * server as the floor of what this machine does. Each engine runs as its own child process (the CLI).
 *
 *   npx tsx tools/bench/src/engine-sim.ts [--duration 5] [--warmup 1] [--engines vllm,sglang]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { runWrk, type WrkResult } from './lib/wrk';
import { markdownTable } from './lib/table';
import { parseToolArgs } from '@triad/testing';

const ROOT = join(__dirname, '..', '..', '..');

/** A bare node:http server answering a fixed ~600-byte chat completion: the baseline of this machine. */
const BARE_SERVER = `
const body = JSON.stringify({ id: 'chatcmpl-bare', object: 'chat.completion', created: 0, model: 'sim-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(300) }, finish_reason: 'length' }],
  usage: { prompt_tokens: 9, total_tokens: 25, completion_tokens: 16 } });
const server = require('node:http').createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body));
});
server.listen(
  0, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'sim-engine ready', url: 'http://127.0.0.1:' + server.address().port })),
);
`;

interface Target {
  readonly name: string;
  readonly url: string;
  readonly child: ChildProcess;
}

async function startChild(name: string, args: readonly string[]): Promise<Target> {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, TRIAD_LOG_LEVEL: 'info' },
  });
  const lines = createInterface({ input: child.stdout });
  for await (const line of lines) {
    try {
      const msg = JSON.parse(line) as { msg?: string; url?: string };
      if (msg.msg === 'sim-engine ready' && msg.url) {
        lines.removeAllListeners();
        child.stdout.resume();
        return { name, url: msg.url, child };
      }
    } catch {
      // not a JSON log line
    }
  }
  throw new Error(`${name} exited before it was ready`);
}

function startEngine(engine: string): Promise<Target> {
  return startChild(engine, [
    join(ROOT, 'apps/cli/bin/triad.js'),
    'sim-engine',
    '--engine',
    engine,
    '--role',
    'both',
    '--port',
    '0',
    '--latency-profile',
    'zero',
  ]);
}

const PROMPT = [{ role: 'user', content: 'Summarise the benefits of disaggregated prefill and decode in two sentences.' }];
const NON_STREAM = JSON.stringify({ model: 'sim-model', messages: PROMPT, max_tokens: 16 });
const STREAM_64 = JSON.stringify({ model: 'sim-model', messages: PROMPT, max_tokens: 64, ignore_eos: true, stream: true });

async function main(): Promise<void> {
  const { values } = parseToolArgs({
    options: {
      duration: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '1' },
      engines: { type: 'string', default: 'vllm,sglang' },
    },
  });
  const durationSec = Number(values.duration);
  const warmupSec = Number(values.warmup);
  const rows: (string | number)[][] = [];
  const record = (target: string, body: string, connections: number, r: WrkResult) =>
    rows.push([target, body, String(connections), r.rps, r.p50ms, r.p99ms, String(r.errors + r.non2xx)]);

  const bare = await startChild('bare node:http', ['-e', BARE_SERVER]);
  try {
    for (const connections of [1, 32]) {
      record(
        bare.name,
        'JSON (fixed)',
        connections,
        await runWrk({ url: `${bare.url}/v1/chat/completions`, body: NON_STREAM, connections, durationSec, warmupSec }),
      );
    }
  } finally {
    bare.child.kill('SIGTERM');
    await once(bare.child, 'exit');
  }
  for (const engine of String(values.engines).split(',')) {
    const target = await startEngine(engine);
    try {
      for (const [label, body] of [
        ['JSON 16 tok', NON_STREAM],
        ['SSE 64 tok', STREAM_64],
      ] as const) {
        for (const connections of [1, 32]) {
          record(
            `${engine} sim`,
            label,
            connections,
            await runWrk({ url: `${target.url}/v1/chat/completions`, body, connections, durationSec, warmupSec }),
          );
        }
      }
    } finally {
      target.child.kill('SIGTERM');
      await once(target.child, 'exit');
    }
  }
  process.stdout.write(`${markdownTable(['target', 'body', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'errors'], rows)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
