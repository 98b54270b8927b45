// Instructions per engine leg on the client side, by transport: the gateway's own HTTP/1.1 client (h1) against
// undici, both through the gateway's UpstreamPools with the leg's handler shape. A keep-alive POST of an EPD-sized
// body (1.6 KB, three headers) answered with a 400-byte JSON body by a node:http server in another process; the
// client process runs under callgrind with counting off through start-up and warm-up, then per case: counters
// zeroed, N legs C at a time, dump, instructions over N. Counts, not seconds: they repeat on a loaded machine.
// Run: npx tsx tools/bench/src/leg-client-instructions.ts [--transports h1,undici] [--connections 1,32]
//   [--requests 3000] [--warmup 3000] [--rounds 2] [--keep-dumps DIR (the callgrind dumps stay there, for
//   callgrind_annotate)]
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseToolArgs } from '@triad/testing';
import { callgrindControl, callgrindLauncher, dumpInstructions } from './lib/callgrind';
import { lineReader } from './lib/line-reader';
import { markdownTable } from './lib/table';

const ANSWER = JSON.stringify({ id: 'cmpl-1', object: 'chat.completion', model: 'epd', pad: 'y'.repeat(320) });

async function main(): Promise<void> {
  const { values } = parseToolArgs({
    options: {
      transports: { type: 'string', default: 'h1,undici' },
      connections: { type: 'string', default: '1,32' },
      requests: { type: 'string', default: '3000' },
      warmup: { type: 'string', default: '3000' },
      rounds: { type: 'string', default: '2' },
      'keep-dumps': { type: 'string' },
    },
  });
  const requests = Number(values.requests);
  // The engine: node:http in a process of its own (node's server, as the engine-sims use).
  const server = spawn(
    process.execPath,
    [
      '-e',
      `const s=require('http').createServer({keepAliveTimeout:30000},(q,r)=>{q.resume();q.on('end',()=>{r.writeHead(200,{'content-type':'application/json','content-length':${Buffer.byteLength(ANSWER)}});r.end(${JSON.stringify(ANSWER)})})}).listen(0,'127.0.0.1',()=>process.stdout.write(s.address().port+'\\n'))`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const port = Number(await lineReader(server)());
  const keep = values['keep-dumps'];
  const dir = keep !== undefined ? (mkdirSync(keep, { recursive: true }), keep) : mkdtempSync(join(tmpdir(), 'triad-leg-callgrind-'));
  const rows: (string | number)[][] = [];
  try {
    for (const transport of String(values.transports).split(',')) {
      const [command, ...prefix] = callgrindLauncher(dir);
      const worker = spawn(
        command,
        [
          ...prefix,
          process.execPath,
          '-e',
          `require(${JSON.stringify(require.resolve('tsx/cjs/api'))}).register(); require(${JSON.stringify(join(__dirname, 'lib/leg-client-worker.ts'))})`,
          transport,
          String(port),
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      );
      const next = lineReader(worker);
      if ((await next()) !== 'ready') throw new Error('the worker did not start');
      worker.stdin.write(`run ${values.warmup} 8\n`);
      await next();
      callgrindControl(['--instr=on', String(worker.pid)]);
      for (const connections of String(values.connections).split(',').map(Number)) {
        const perRound: number[] = [];
        for (let r = 0; r < Number(values.rounds); r++) {
          callgrindControl(['--zero', String(worker.pid)]);
          worker.stdin.write(`run ${requests} ${connections}\n`);
          const done = await next();
          perRound.push(Math.round(dumpInstructions(worker.pid as number, dir) / requests));
          process.stderr.write(
            `${transport} c${connections} round ${r + 1}: ${perRound[perRound.length - 1]} instructions/leg (${done})\n`,
          );
        }
        rows.push([transport, String(connections), Math.min(...perRound), perRound.join(' / ')]);
      }
      worker.stdin.write('exit\n');
      await new Promise((resolve) => worker.once('exit', resolve));
    }
  } finally {
    server.kill();
    if (keep === undefined) rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`client instructions per leg (callgrind; ${requests} legs per round)\n\n`);
  process.stdout.write(`${markdownTable(['transport', 'conns', 'instructions/leg (min)', 'rounds'], rows)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`leg-client instructions: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
